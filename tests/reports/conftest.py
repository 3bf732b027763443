"""A small fixed price history for the weekly report of 2026-W48 (Mon 23 Nov - Sun 29 Nov).

Snapshots of source "test" at six instants; each lists every offer it still has (an offer
missing from a snapshot is closed by ingest). Expected values in the tests are worked out by
hand from the table below.

    offer                                   S0     S1     S2     S3     S4     S5
    A lambda H100 SXM x1 on-demand          2.49   2.49   2.49   2.29   2.29   1.99
    B aws p5.48xlarge 8xH100 on-demand      98.32  98.32  98.32  98.32  98.32  98.32
    C aws p5.48xlarge 8xH100 spot (1a)      40.00  40.00  40.00  44.00  44.00  44.00
    D runpod H100 SXM x1 on-demand secure   2.19   2.69   2.69   2.99   2.99   2.99
    E vastai H100 SXM x1 bid                1.60   1.60   1.60   1.40   1.40   1.40
    N vastai H100 SXM x1 on-demand          2.50   2.50   2.50   2.50   2.50   2.50
    F lambda A100 80GB x1 on-demand         1.29   1.29   1.29   1.29   1.29   1.29
    G gcp a2-ultragpu-1g on-demand          5.07   5.07   5.07   4.50   4.50   4.50
    H gcp a2-ultragpu-1g spot               1.57   1.57   1.57   1.57   1.57   1.57
    I runpod A100 PCIe x1 on-demand         1.64   1.64   1.64   -      -      -
    J <script> provider L40S on-demand      -      -      0.99   0.89   0.89   0.89
    K <script> provider L40S spot           -      -      0.50   0.45   0.45   0.45
    L lambda H100 PCIe x1 on-demand         -      -      -      1.99   1.99   1.99
    M datacrunch H100 EUR on-demand         2.99   2.99   2.99   2.99   2.99   2.99

Also: source "stale-src" (CoreWeave 8xH100 at 49.24/h) seen at S1 and 2026-11-21 12:00 only;
source "flaky" failing in the week; two rejected rows in S3; an AWS interruption band; two
scheduler job runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from scrapers.base import InterruptionFact, PriceObservation
from tracker.core.errors import SourceError

S0 = datetime(2026, 9, 7, 12, tzinfo=UTC)
S1 = datetime(2026, 11, 16, 12, tzinfo=UTC)
S2 = datetime(2026, 11, 22, 12, tzinfo=UTC)
S3 = datetime(2026, 11, 27, 12, tzinfo=UTC)
S4 = datetime(2026, 11, 29, 12, tzinfo=UTC)
S5 = datetime(2026, 12, 1, 12, tzinfo=UTC)
SNAPSHOTS = (S0, S1, S2, S3, S4, S5)
WEEK = "2026-W48"
NOW = datetime(2026, 12, 2, 9, tzinfo=UTC)  # the clock when the report is built

EVIL_PROVIDER = '<script>alert("x")</script>'
EVIL_REGION = "=HYPERLINK(\"http://evil\")"
EVIL_INSTANCE = "<img src=x onerror=alert(1)>"

_ = None
OFFERS = {
    "A": (dict(provider="lambda", region="us-east-1", instance_type="gpu_1x_h100_sxm5",
               gpu_name="H100 SXM", gpu_count=1, category="on-demand"),
          ("2.49", "2.49", "2.49", "2.29", "2.29", "1.99")),
    "B": (dict(provider="aws", region="us-east-1", instance_type="p5.48xlarge",
               gpu_name="H100", gpu_count=8, category="on-demand"),
          ("98.32",) * 6),
    "C": (dict(provider="aws", region="us-east-1", zone="us-east-1a",
               instance_type="p5.48xlarge", gpu_name="H100", gpu_count=8, category="spot"),
          ("40.00", "40.00", "40.00", "44.00", "44.00", "44.00")),
    "D": (dict(provider="runpod", instance_type="H100 SXM", variant="secure",
               gpu_name="H100 SXM", gpu_count=1, category="on-demand"),
          ("2.19", "2.69", "2.69", "2.99", "2.99", "2.99")),
    "E": (dict(provider="vastai", instance_type="H100 SXM", gpu_name="H100 SXM", gpu_count=1,
               category="bid"),
          ("1.60", "1.60", "1.60", "1.40", "1.40", "1.40")),
    "N": (dict(provider="vastai", instance_type="H100 SXM", gpu_name="H100 SXM", gpu_count=1,
               category="on-demand"),
          ("2.50",) * 6),
    "F": (dict(provider="lambda", region="us-east-1", instance_type="gpu_1x_a100_sxm4_80gb",
               gpu_name="A100 80GB", gpu_count=1, category="on-demand"),
          ("1.29",) * 6),
    "G": (dict(provider="gcp", region="us-central1", instance_type="a2-ultragpu-1g",
               gpu_name="A100 80GB", gpu_count=1, category="on-demand"),
          ("5.07", "5.07", "5.07", "4.50", "4.50", "4.50")),
    "H": (dict(provider="gcp", region="us-central1", instance_type="a2-ultragpu-1g",
               gpu_name="A100 80GB", gpu_count=1, category="spot"),
          ("1.57",) * 6),
    "I": (dict(provider="runpod", instance_type="A100 PCIe", gpu_name="A100 PCIe",
               gpu_memory_gb=80, gpu_count=1, category="on-demand"),
          ("1.64", "1.64", "1.64", _, _, _)),
    "J": (dict(provider=EVIL_PROVIDER, region=EVIL_REGION, instance_type=EVIL_INSTANCE,
               gpu_name="L40S", gpu_count=1, category="on-demand"),
          (_, _, "0.99", "0.89", "0.89", "0.89")),
    "K": (dict(provider=EVIL_PROVIDER, region=EVIL_REGION, instance_type=EVIL_INSTANCE,
               gpu_name="L40S", gpu_count=1, category="spot"),
          (_, _, "0.50", "0.45", "0.45", "0.45")),
    "L": (dict(provider="lambda", region="us-west-1", instance_type="gpu_1x_h100_pcie",
               gpu_name="H100 PCIe", gpu_count=1, category="on-demand"),
          (_, _, _, "1.99", "1.99", "1.99")),
    "M": (dict(provider="datacrunch", region="FIN-01", instance_type="1H100.80S.30V",
               gpu_name="H100 SXM", gpu_count=1, category="on-demand", currency="EUR"),
          ("2.99",) * 6),
}


def active_markup(html: str) -> list[str]:
    """Script elements and event-handler attributes an HTML parser finds: scraped strings
    must never turn into these, whatever the serializer does with quotes."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Finder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag in ("script", "iframe", "object", "embed"):
                found.append(tag)
            found.extend(f"{tag}[{name}]" for name, _ in attrs if name.startswith("on"))

    Finder().feed(html)
    return found


def snapshot(index: int) -> list[PriceObservation]:
    when = SNAPSHOTS[index]
    records = []
    for spec, prices in OFFERS.values():
        price = prices[index]
        if price is None:
            continue
        fields = {"currency": "USD", **spec}
        records.append(PriceObservation(observed_at=when, price_per_hour=Decimal(price),
                                        **fields))
    return records


def fill(db) -> None:
    from tracker.store.ingest import ingest_records
    from tracker.store.models import JobRun

    for index, when in enumerate(SNAPSHOTS):
        records: list = snapshot(index)
        if when == S1:
            records.append(InterruptionFact(
                provider="aws", region="us-east-1", instance_type="p5.48xlarge", band=0,
                band_label="<5%", min_pct=0.0, max_pct=5.0, as_of=S1, savings_pct=60.0))
        if when == S3:
            records.append(PriceObservation(
                provider="aws", region="us-east-1", instance_type="p5.free", gpu_name="H100",
                gpu_count=8, category="on-demand", price_per_hour=Decimal("0"),
                currency="USD", observed_at=S3))
            records.append(PriceObservation(
                provider="aws", region="us-east-1", instance_type="vd5", gpu_name="Voodoo5",
                gpu_count=1, category="on-demand", price_per_hour=Decimal("1"),
                currency="USD", observed_at=S3))
        summary = ingest_records(db, "test", records, started_at=when)
        assert summary.status == "ok", summary.error
    stale = dict(provider="coreweave", region="US-EAST-04", instance_type="gd-8xh100ib-i128",
                 gpu_name="H100", gpu_count=8, category="on-demand", currency="USD")
    for when in (S1, datetime(2026, 11, 21, 12, tzinfo=UTC)):
        summary = ingest_records(db, "stale-src", [PriceObservation(
            observed_at=when, price_per_hour=Decimal("49.24"), **stale)], started_at=when)
        assert summary.status == "ok", summary.error

    def failing():
        raise SourceError("HTTP 503 from flaky.example after 3 retries")
        yield  # pragma: no cover

    failed = ingest_records(db, "flaky", failing(),
                            started_at=datetime(2026, 11, 28, 6, tzinfo=UTC))
    assert failed.status == "failed"
    with db.session() as session:
        session.add(JobRun(job="refresh", trigger="schedule", started_at=S3,
                           finished_at=S3, status="ok", summary="{}"))
        session.add(JobRun(job="refresh", trigger="schedule",
                           started_at=datetime(2026, 11, 28, 6, tzinfo=UTC),
                           finished_at=datetime(2026, 11, 28, 6, 1, tzinfo=UTC),
                           status="failed", summary="{}", error="1 of 2 sources failed"))
        session.commit()


@pytest.fixture(scope="session")
def report_db_path(tmp_path_factory) -> str:
    """The filled database, built once per test session (ingest is the slow part)."""
    from tracker.store.db import open_database

    path = tmp_path_factory.mktemp("reportdb") / "tracker.db"
    db = open_database(f"sqlite:///{path}")
    try:
        fill(db)
    finally:
        db.close()
    return str(path)


@pytest.fixture
def report_db(report_db_path, tmp_path):
    """A private copy of the filled database (tests may archive and record deliveries)."""
    import shutil

    from tracker.store.db import open_database

    copy = tmp_path / "tracker.db"
    shutil.copy(report_db_path, copy)
    db = open_database(f"sqlite:///{copy}")
    yield db
    db.close()


@pytest.fixture
def report_config(tmp_path):
    import reports  # noqa: F401  (registers the [report] and [smtp] defaults)
    from tracker.config.schema import load_config

    path = tmp_path / "config.toml"
    path.write_text(
        '[report]\n'
        f'out_dir = "{tmp_path / "reports"}"\n'
        'featured_gpus = ["h100-sxm", "a100-80gb", "l40s"]\n'
        'recipients = ["finance@example.com"]\n', encoding="utf-8")
    return load_config(path, environ={})


def write_mail_config(tmp_path, port: int, user: str | None = None):
    """config.toml for the weekly mail to two recipients through the SMTP server on loopback
    `port` (plain, logging in as `user` when given); the password stays in the environment."""
    path = tmp_path / "config.toml"
    path.write_text(
        "[report]\n"
        f'out_dir = "{tmp_path / "reports"}"\n'
        'featured_gpus = ["h100-sxm", "a100-80gb", "l40s"]\n'
        'recipients = ["finance@example.com", "cfo@example.com"]\n'
        "[smtp]\n"
        f'host = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
        + (f'user = "{user}"\n' if user else "")
        + 'sender = "gpu-tracker@example.com"\n', encoding="utf-8")
    return path
