"""The database schema (SQLModel tables). Alembic migrations in tracker/store/migrations create it.

Price history is stored as spans: one row per run of an unchanged price of an offer, from
`first_seen` to `last_seen`, closed by `valid_to` when the price changed or the offer left
the provider's list. The price of an offer at instant t is the span with
first_seen <= t < valid_to (or valid_to null). An open span's last sighting is the later of
its `last_seen` and its region's `source_scope.last_snapshot_at`
(tracker.store.queries.last_sighting).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import Column, Index, Table, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from tracker.store.types import ExactDecimal, UTCDateTime

if TYPE_CHECKING:
    class TableModel(SQLModel):
        """SQLModel as the type checker should see a `table=True` class: SQLModel attaches the
        SQLAlchemy `__table__` at class creation but does not declare it, and the store, ingest
        and jobs build Core statements on it."""

        __table__: ClassVar[Table]
else:
    # At run time the tables derive from SQLModel itself: the class above only tells the
    # type checker what SQLModel attaches.
    TableModel = SQLModel


def _dt(nullable: bool = False, index: bool = False) -> Column:
    return Column(UTCDateTime(), nullable=nullable, index=index)


class Provider(TableModel, table=True):
    __tablename__ = "provider"
    id: str = Field(primary_key=True, max_length=64)
    display_name: str = Field(max_length=128)


class GpuModel(TableModel, table=True):
    __tablename__ = "gpu_model"
    id: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=128)
    vendor: str = Field(max_length=32)
    memory_gb: int
    form_factor: str = Field(max_length=16)


class Offer(TableModel, table=True):
    __tablename__ = "offer"
    __table_args__ = (
        UniqueConstraint("source", "provider", "region", "zone", "instance_type", "variant",
                         "category", name="uq_offer_identity"),
        Index("ix_offer_gpu_category", "gpu_id", "category"),
    )
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=64, index=True)
    provider: str = Field(max_length=64, foreign_key="provider.id")
    region: str = Field(default="", max_length=64)
    zone: str = Field(default="", max_length=64)
    instance_type: str = Field(max_length=128)
    variant: str = Field(default="", max_length=64)
    category: str = Field(max_length=16)
    gpu_id: str = Field(max_length=64, foreign_key="gpu_model.id")
    gpu_raw: str = Field(max_length=128)
    gpu_count: float
    fractional: bool = False
    gpu_memory_gb: float | None = None
    vcpus: float | None = None
    ram_gb: float | None = None
    source_url: str | None = Field(default=None, sa_column=Column(Text))
    attributes: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    first_seen: datetime = Field(sa_column=_dt())
    latest_span_id: int | None = None
    # Revision 0005: the offer's links (tracker.core.fabric.offer_network). node_link_gbps is GB/s
    # per GPU one direction; cluster_gbps Gb/s per instance; cluster_network None = hosts
    # that one job cannot join into a cluster.
    node_link: str | None = Field(default=None, max_length=32)
    node_link_gbps: float | None = None
    cluster_network: str | None = Field(default=None, max_length=32)
    cluster_gbps: float | None = None
    network_note: str | None = Field(default=None, sa_column=Column(Text))


class PriceSpan(TableModel, table=True):
    __tablename__ = "price_span"
    __table_args__ = (Index("ix_price_span_offer_first_seen", "offer_id", "first_seen"),
                      # Revision 0009: the spans first seen in a window, across offers.
                      Index("ix_price_span_first_seen", "first_seen"),
                      # Revision 0010, PostgreSQL only: the open spans (the current prices),
                      # by id, for its planner (SQLite seeks each offer's newest span by rowid).
                      Index("ix_price_span_open", "id",
                            postgresql_where=text("valid_to IS NULL")).ddl_if(
                          dialect="postgresql"))
    id: int | None = Field(default=None, primary_key=True)
    offer_id: int = Field(foreign_key="offer.id")
    price_per_hour: Decimal = Field(sa_column=Column(ExactDecimal(), nullable=False))
    currency: str = Field(max_length=3)
    first_seen: datetime = Field(sa_column=_dt())
    last_seen: datetime = Field(sa_column=_dt())
    valid_to: datetime | None = Field(default=None, sa_column=_dt(nullable=True))
    run_id: int | None = None


class IngestRun(TableModel, table=True):
    __tablename__ = "ingest_run"
    __table_args__ = (Index("ix_ingest_run_source_started", "source", "started_at"),)
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=64)
    version: str | None = Field(default=None, max_length=128)
    trigger: str = Field(default="manual", max_length=32)
    host: str = Field(default="", max_length=128)
    started_at: datetime = Field(sa_column=_dt())
    finished_at: datetime | None = Field(default=None, sa_column=_dt(nullable=True))
    status: str = Field(max_length=16)
    offers_seen: int = 0
    prices_changed: int = 0
    new_offers: int = 0
    offers_closed: int = 0
    rejected: int = 0
    error: str | None = Field(default=None, sa_column=Column(Text))


class RejectedRow(TableModel, table=True):
    """A row a source could not store, kept once per (source, row key, reason) (revision 0004):
    `run_id`, `raw` and `observed_at` are of its latest sighting, `count` how often it was seen."""

    __tablename__ = "rejected_row"
    __table_args__ = (UniqueConstraint("source", "row_key", "reason", name="uq_rejected_row_key"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int | None = Field(default=None, index=True)
    source: str = Field(max_length=64)
    provider: str = Field(default="", max_length=64)
    reason: str = Field(sa_column=Column(Text, nullable=False))
    raw: str = Field(sa_column=Column(Text, nullable=False))
    observed_at: datetime = Field(sa_column=_dt())
    row_key: str = Field(max_length=255)
    first_seen: datetime = Field(sa_column=_dt())
    last_seen: datetime = Field(sa_column=_dt())
    count: int = 1


class CatalogVersionRow(TableModel, table=True):
    """A catalog version a source read (revision 0004): gpuhunt's `20250818-42` of a provider,
    with the time it was published, so a catalog that stopped updating is flagged."""

    __tablename__ = "catalog_version"
    source: str = Field(primary_key=True, max_length=64)
    provider: str = Field(primary_key=True, max_length=64)
    version: str = Field(primary_key=True, max_length=128)
    published_at: datetime | None = Field(default=None, sa_column=_dt(nullable=True))
    first_seen: datetime = Field(sa_column=_dt())
    last_seen: datetime = Field(sa_column=_dt())
    run_id: int | None = None


# Revision 0002 -------------------------------------------------------------------------------


class SpotInterruption(TableModel, table=True):
    __tablename__ = "spot_interruption"
    __table_args__ = (
        Index("ix_spot_interruption_key", "provider", "region", "instance_type", "as_of"),
    )
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=64)
    provider: str = Field(max_length=64)
    region: str = Field(max_length=64)
    instance_type: str = Field(max_length=128)
    os: str = Field(default="Linux", max_length=16)
    band: int
    band_label: str = Field(max_length=32)
    min_pct: float
    max_pct: float | None = None
    savings_pct: float | None = None
    as_of: datetime = Field(sa_column=_dt())
    last_seen: datetime = Field(sa_column=_dt())
    run_id: int | None = None


class JobRun(TableModel, table=True):
    __tablename__ = "job_run"
    __table_args__ = (Index("ix_job_run_job_started", "job", "started_at"),)
    id: int | None = Field(default=None, primary_key=True)
    job: str = Field(max_length=64)
    trigger: str = Field(max_length=32)
    host: str = Field(default="", max_length=128)
    started_at: datetime = Field(sa_column=_dt())
    finished_at: datetime | None = Field(default=None, sa_column=_dt(nullable=True))
    status: str = Field(max_length=16)
    summary: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    error: str | None = Field(default=None, sa_column=Column(Text))


class ReportArchive(TableModel, table=True):
    __tablename__ = "report_archive"
    __table_args__ = (UniqueConstraint("week", "kind", name="uq_report_week_kind"),)
    id: int | None = Field(default=None, primary_key=True)
    week: str = Field(max_length=10)
    kind: str = Field(max_length=16)
    path: str = Field(sa_column=Column(Text, nullable=False))
    sha256: str = Field(max_length=64)
    created_at: datetime = Field(sa_column=_dt())


class ReportDelivery(TableModel, table=True):
    __tablename__ = "report_delivery"
    id: int | None = Field(default=None, primary_key=True)
    week: str = Field(max_length=10, index=True)
    recipients: str = Field(sa_column=Column(Text, nullable=False))
    sent_at: datetime = Field(sa_column=_dt())
    message_id: str = Field(default="", max_length=255)
    status: str = Field(default="sent", max_length=16)


# Revision 0003 -------------------------------------------------------------------------------


class SourceState(TableModel, table=True):
    """What a source's last run left of its offers, for the next run to compare with
    (tracker/store/ingest/kept_state.py): its `offers` (identities and ids, rewritten when
    they change) and its `prices` (rewritten by every run, valid only while `run_id` is the
    source's newest run)."""

    __tablename__ = "source_state"
    source: str = Field(primary_key=True, max_length=64)
    part: str = Field(primary_key=True, max_length=16)
    run_id: int
    body: str = Field(sa_column=Column(Text, nullable=False))


class SourceScope(TableModel, table=True):
    """When a source last listed a provider's region in a complete snapshot.

    Every offer there that is still open was seen then (an offer a snapshot no longer lists
    is closed), so an open span's last sighting is this time; ingest need not rewrite every
    unchanged span on every refresh.
    """

    __tablename__ = "source_scope"
    source: str = Field(primary_key=True, max_length=64)
    provider: str = Field(primary_key=True, max_length=64)
    region: str = Field(primary_key=True, max_length=64)
    last_snapshot_at: datetime = Field(sa_column=_dt())


# Revision 0006 (market intelligence: exchange rates, alerts, FOCUS usage) -------------------


class ExchangeRate(TableModel, table=True):
    """A euro reference rate: 1 EUR = `rate` units of `currency` on the ECB business day
    `rate_date` (YYYY-MM-DD). Fetched by the `ecb` source; the bundled snapshot fills gaps."""

    __tablename__ = "exchange_rate"
    currency: str = Field(primary_key=True, max_length=3)
    rate_date: str = Field(primary_key=True, max_length=10)
    rate: Decimal = Field(sa_column=Column(ExactDecimal(), nullable=False))
    source: str = Field(default="ecb", max_length=64)
    fetched_at: datetime = Field(sa_column=_dt())


class AlertState(TableModel, table=True):
    """Whether an alert rule's condition held at its last evaluation, so a firing is delivered
    once until the condition clears."""

    __tablename__ = "alert_state"
    rule: str = Field(primary_key=True, max_length=128)
    active: bool = False
    since: datetime | None = Field(default=None, sa_column=_dt(nullable=True))
    checked_at: datetime = Field(sa_column=_dt())
    detail: str = Field(default="", sa_column=Column(Text, nullable=False))


class AlertEvent(TableModel, table=True):
    """One transition of a rule (`fired` or `cleared`) and where it was delivered."""

    __tablename__ = "alert_event"
    __table_args__ = (Index("ix_alert_event_rule_at", "rule", "at"),)
    id: int | None = Field(default=None, primary_key=True)
    rule: str = Field(max_length=128)
    kind: str = Field(max_length=16)
    at: datetime = Field(sa_column=_dt())
    message: str = Field(sa_column=Column(Text, nullable=False))
    payload: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    delivered: str = Field(default="", sa_column=Column(Text, nullable=False))


class FocusUsage(TableModel, table=True):
    """One GPU line of an imported FOCUS cost-and-usage export (the invoice check reads it)."""

    __tablename__ = "focus_usage"
    __table_args__ = (
        UniqueConstraint("file_sha256", "line", name="uq_focus_usage_file_line"),
    )
    id: int | None = Field(default=None, primary_key=True)
    file_sha256: str = Field(max_length=64, index=True)
    line: int
    provider: str = Field(max_length=64)
    region: str = Field(default="", max_length=64)
    sku_id: str = Field(default="", max_length=255)
    resource_id: str = Field(default="", sa_column=Column(Text, nullable=False))
    instance_type: str = Field(default="", max_length=128)
    gpu_id: str = Field(max_length=64)
    gpu_count: float
    pricing_category: str = Field(default="", max_length=32)
    charge_period_start: datetime = Field(sa_column=_dt())
    charge_period_end: datetime = Field(sa_column=_dt())
    usage_hours: float
    effective_cost: Decimal = Field(sa_column=Column(ExactDecimal(), nullable=False))
    billing_currency: str = Field(max_length=3)
    imported_at: datetime = Field(sa_column=_dt())
    # FOCUS `Tags` (a JSON object, key -> value) for budgets scoped by a tag.
    tags: str = Field(default="{}", sa_column=Column(Text, nullable=False,
                                                      server_default="{}"))
