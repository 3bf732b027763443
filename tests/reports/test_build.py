"""The report document for the fixed dataset of conftest.py, checked value by value."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reports.build import build_report
from reports.sections.common import exact_rank, pct_change
from reports.sections.trends import sample_times
from reports.weeks import Week, default_week
from tests.reports.conftest import EVIL_PROVIDER, NOW, WEEK
from tracker.core.errors import InvalidInput


@pytest.fixture
def doc(report_db, report_config):
    return build_report(report_db, report_config, WEEK, now=NOW)


def _figure(doc, gpu):
    return next(e for e in doc["key_figures"] if e["gpu"] == gpu)


def test_document_header(doc):
    assert doc["schema_version"] == 1
    assert doc["kind"] == "gpu-tracker.weekly-report"
    assert doc["week"] == "2026-W48"
    assert doc["currency"] == "USD"
    assert doc["generated_at"] is None
    assert doc["period"] == {
        "week_start": "2026-11-23T00:00:00Z", "week_end": "2026-11-30T00:00:00Z",
        "as_of": "2026-11-30T00:00:00Z", "previous_as_of": "2026-11-23T00:00:00Z",
        "complete": True, "trend_start": "2026-09-08T00:00:00Z", "timezone": "UTC",
    }


def test_key_figures_week_over_week(doc):
    assert [e["gpu"] for e in doc["key_figures"]] == [
        "h100-sxm", "h100-pcie", "a100-80gb", "a100-80gb-pcie", "l40s"]
    h100 = _figure(doc, "h100-sxm")
    od = h100["on_demand"]
    assert (od["now"]["price"], od["now"]["provider"], od["now"]["region"]) == (
        "2.29", "lambda", "us-east-1")
    # Offer A: 2.49 at S2 (last week's as-of) -> 2.29 at S3: 2.29 / 2.49 - 1 = -8.03 %.
    assert (od["previous"]["price"], od["change"], od["change_pct"]) == ("2.49", "-0.2", -8.03)
    # A + B (8x 12.29/GPU) + D + N + the stale CoreWeave offer + the EUR offer, converted.
    assert od["offers"] == 6
    spot = h100["spot"]
    assert (spot["now"]["price"], spot["now"]["provider"], spot["now"]["category"]) == (
        "1.4", "vastai", "bid")
    assert (spot["previous"]["price"], spot["change"], spot["change_pct"]) == ("1.6", "-0.2", -12.5)

    a100 = _figure(doc, "a100-80gb")
    assert (a100["on_demand"]["now"]["price"], a100["on_demand"]["change"],
            a100["on_demand"]["change_pct"]) == ("1.29", "0", 0.0)
    assert a100["spot"]["now"]["provider"] == "gcp"
    # New this week: no comparison, no percent (never divided by a missing base).
    pcie = _figure(doc, "h100-pcie")["on_demand"]
    assert (pcie["now"]["price"], pcie["previous"], pcie["change"], pcie["change_pct"]) == (
        "1.99", None, None, None)
    assert _figure(doc, "h100-pcie")["spot"] is None
    # Gone this week: shown with last week's price only.
    gone = _figure(doc, "a100-80gb-pcie")["on_demand"]
    assert gone["now"] is None and gone["previous"]["price"] == "1.64"
    l40s = _figure(doc, "l40s")
    # Offers J and K: 0.99 -> 0.89 (-10.1 %) and 0.50 -> 0.45 (-10.0 %).
    assert (l40s["on_demand"]["change"], l40s["on_demand"]["change_pct"]) == ("-0.1", -10.1)
    assert (l40s["spot"]["change"], l40s["spot"]["change_pct"]) == ("-0.05", -10.0)
    assert l40s["on_demand"]["now"]["provider"] == EVIL_PROVIDER


def test_later_price_changes_do_not_leak_into_the_week(doc):
    # Offer A drops to 1.99 on 1 Dec (week 49): week 48 must still show 2.29.
    assert _figure(doc, "h100-sxm")["on_demand"]["now"]["price"] == "2.29"
    row = next(r for r in doc["prices"]["rows"] if r["instance_type"] == "gpu_1x_h100_sxm5")
    assert row["price_per_hour"] == "2.29"


def test_movers(doc):
    movers = doc["movers"]
    assert (movers["compared"], movers["changed"], movers["new_offers"],
            movers["removed_offers"]) == (13, 7, 1, 1)  # the EUR offer compared converted
    # From the offers table in conftest.py: D 2.69 -> 2.99 (+11.15 %), C 40/8 -> 44/8 per GPU
    # (+10 %), E 1.60 -> 1.40, G 5.07 -> 4.50 (-11.24 %), J, K and A as in the key figures.
    increases = [(m["provider"], m["instance_type"], m["category"], m["previous_price"],
                  m["price"], m["change"], m["change_pct"]) for m in movers["increases"]]
    assert increases == [
        ("runpod", "H100 SXM", "on-demand", "2.69", "2.99", "0.3", 11.15),
        ("aws", "p5.48xlarge", "spot", "5", "5.5", "0.5", 10.0),
    ]
    decreases = [(m["provider"], m["category"], m["change_pct"]) for m in movers["decreases"]]
    assert decreases == [
        ("vastai", "bid", -12.5),
        ("gcp", "on-demand", -11.24),
        (EVIL_PROVIDER, "on-demand", -10.1),
        (EVIL_PROVIDER, "spot", -10.0),
        ("lambda", "on-demand", -8.03),
    ]
    # lambda: A -8.03 % and F unchanged, mean -4.02 %; L is new. aws: C +10 %, B unchanged.
    by_provider = {p["provider"]: p for p in movers["by_provider"]}
    assert by_provider["lambda"] == {
        "provider": "lambda", "compared": 2, "up": 0, "down": 1, "unchanged": 1,
        "mean_change_pct": -4.02, "new": 1, "removed": 0}
    assert by_provider["runpod"]["removed"] == 1
    assert by_provider["aws"]["mean_change_pct"] == 5.0
    assert movers["by_region"][0] == {
        "provider": "runpod", "region": "", "compared": 1, "up": 1, "down": 0, "unchanged": 0,
        "mean_change_pct": 11.15}


def test_new_lows_within_the_trend_window(doc):
    lows = [(x["gpu"], x["bucket"], x["price"], x["previous_low"]) for x in doc["new_lows"]]
    # H100 on-demand 2.29 is not a low: RunPod listed 2.19 in September.
    assert lows == [("h100-sxm", "spot", "1.4", "1.6"), ("l40s", "on_demand", "0.89", "0.99"),
                    ("l40s", "spot", "0.45", "0.5")]
    assert doc["new_lows"][0]["window_start"] == "2026-09-07T00:00:00Z"


def test_spot_discounts_and_interruption_bands(doc):
    rows = {(r["provider"], r["instance_type"]): r for r in doc["spot"]["offers"]}
    aws = rows[("aws", "p5.48xlarge")]
    # 44.00/8 = 5.50 per GPU against 98.32/8 = 12.29 on-demand.
    assert (aws["price"], aws["on_demand_price"], aws["discount_pct"]) == ("5.5", "12.29", 55.25)
    assert aws["interruption"]["label"] == "<5%" and aws["zone"] == "us-east-1a"
    # E against N: 1 - 1.40 / 2.50 = 44 %; H against G: 1 - 1.57 / 4.50 = 65.11 %.
    assert rows[("vastai", "H100 SXM")]["discount_pct"] == 44.0
    assert rows[("vastai", "H100 SXM")]["interruption"] is None
    assert rows[("gcp", "a2-ultragpu-1g")]["discount_pct"] == 65.11
    by_gpu = {g["gpu"]: g for g in doc["spot"]["by_gpu"]}
    assert by_gpu["h100-sxm"]["median_discount_pct"] == 49.62  # median of 55.25 and 44.0
    assert doc["spot"]["with_interruption_band"] == 1


def test_trends(doc):
    trends = doc["trends"]
    assert [c["gpu"] for c in trends["charts"]] == ["h100-sxm", "a100-80gb", "l40s"]
    times = trends["times"]
    assert (times[0], times[-1], len(times)) == (
        "2026-09-08T00:00:00Z", "2026-11-30T00:00:00Z", 84)
    h100 = trends["charts"][0]
    series = {(s["provider"], s["bucket"]): s["prices"] for s in h100["series"]}
    lam = series[("lambda", "on_demand")]
    assert lam[0] == "2.49" and lam[-1] == "2.29"
    assert lam[times.index("2026-11-28T00:00:00Z")] == "2.29"
    assert lam[times.index("2026-11-27T00:00:00Z")] == "2.49"
    # CoreWeave's stale offer appears with its first snapshot (16 Nov 12:00).
    core = series[("coreweave", "on_demand")]
    assert core[times.index("2026-11-16T00:00:00Z")] is None
    assert core[times.index("2026-11-17T00:00:00Z")] == "6.155"  # 49.24 / 8 GPUs
    finding = h100["finding"]
    assert finding["on_demand"]["start_price"] == "2.19"
    assert finding["on_demand"]["start_provider"] == "runpod"
    assert finding["on_demand"]["end_price"] == "2.29"
    assert finding["on_demand"]["change_pct"] == 4.57  # 2.29 / 2.19 - 1
    assert (finding["spot"]["end_price"], finding["spot"]["low_price"]) == ("1.4", "1.4")
    # The L40S offers appear on 22 Nov: no points before.
    l40s = trends["charts"][2]
    od = next(s for s in l40s["series"] if s["bucket"] == "on_demand")["prices"]
    assert od[times.index("2026-11-22T00:00:00Z")] is None
    assert od[times.index("2026-11-23T00:00:00Z")] == "0.99"


def test_data_quality(doc):
    q = doc["data_quality"]
    assert (q["refreshed"], q["failed"], q["stale"]) == (["test"], ["flaky"], ["stale-src"])
    assert q["rejected_total"] == 2
    assert [r["reason"] for r in q["rejected"]] == [
        "price must be positive, got 0", "unknown GPU 'Voodoo5'"]
    sources = {s["source"]: s for s in q["sources"]}
    assert sources["flaky"]["last_error"] == "HTTP 503 from flaky.example after 3 retries"
    assert sources["test"]["runs"] == 2 and sources["test"]["offers"] == 13
    assert sources["stale-src"]["newest_price_at"] == "2026-11-21T12:00:00Z"
    assert (q["offers_other_currency"], q["other_currencies"]) == (1, ["EUR"])
    assert q["jobs"] == [{
        "job": "refresh", "runs": 2, "ok": 1, "failed": 1, "last_status": "failed",
        "last_started_at": "2026-11-28T06:00:00Z", "last_error": "1 of 2 sources failed"}]


def test_prices_are_every_offer_of_the_week(doc):
    prices = doc["prices"]
    assert prices["count"] == 14
    assert prices["columns"][:4] == ["gpu", "gpu_name", "provider", "region"]
    eur = next(r for r in prices["rows"] if r["currency"] == "EUR")
    assert eur["price_per_gpu_hour"] == "2.99"  # the CSV keeps the quoted currency
    aws = next(r for r in prices["rows"] if r["instance_type"] == "p5.48xlarge"
               and r["category"] == "on-demand")
    assert (aws["price_per_hour"], aws["price_per_gpu_hour"], aws["gpu_count"]) == (
        "98.32", "12.29", 8.0)


def test_summary(doc):
    headline = doc["summary"]["headline"]
    assert (headline["classes_down"], headline["classes_up"], headline["classes_flat"],
            headline["classes_priced"]) == (4, 0, 2, 7)
    assert headline["biggest"]["gpu"] == "h100-sxm" and headline["biggest"]["bucket"] == "spot"
    kinds = [item["kind"] for item in doc["summary"]["items"]]
    assert kinds == ["move"] * 3 + ["new_low"] * 3 + ["recommendation"] * 3 + ["data_quality"]


def test_recommendations(doc):
    recs = {w["name"]: w for w in doc["recommendations"]["workloads"]}
    finetune = recs["Fine-tune Llama 3.1 8B on 2B tokens, weekly"]
    best = finetune["best"]
    # Lambda's 1-GPU on-demand instances are independent hosts: they are never joined into
    # a pipeline over the network (docs/fabric.md), so the cheapest run is one 8-GPU node
    # with InfiniBand between nodes, data-parallel, within the 24 h deadline.
    assert (best["gpu"], best["count"], best["provider"], best["category"]) == (
        "h100-sxm", 8, "coreweave", "on-demand")
    assert best["plan"] == {"tensor_parallel": 1, "pipeline_parallel": 1, "data_parallel": 8}
    assert best["instances"] == 1 and best["meets_deadline"] is True
    # cost = 8 GPUs x price per GPU-hour x billed hours (per-second billing), rounded.
    from decimal import Decimal
    assert Decimal(best["cost"]) == (Decimal(best["price_per_gpu_hour"]) * 8
                                     * Decimal(best["billed_hours"])).quantize(Decimal("0.01"))
    assert finetune["single_gpu"] is None
    assert "needs at least 2 GPUs" in finetune["single_gpu_note"]
    assert "lambda gpu_1x_h100_sxm5: on-demand instances are independent hosts" in \
        " ".join(finetune["absent"])
    assert finetune["fastest"]["count"] == 64
    assert finetune["fastest"]["provider"] == "coreweave"
    # Eight vast.ai hosts are not one job (independent hosts): spot comes from elsewhere.
    assert finetune["spot"].get("provider") != "vastai"
    assert finetune["rent_vs_buy"]["verdict"] == "rent"
    assert finetune["rent_vs_buy"]["inputs"]["gpus"] == "8"
    assert finetune["change"]["changed"] is False

    serving = recs["Serve Llama 3.1 70B, 1,000 in / 1,000 out, TPOT ≤ 50 ms, 50M output tokens "
                   "a day"]
    serve = serving["best"]
    # 141 GB of BF16 weights need TP >= 2 inside one instance: only the 8-GPU offers qualify
    # (the 1-GPU A100 and H100 instances cannot form a TP group over the network).
    assert (serve["gpu"], serve["count"], serve["tensor_parallel"]) == ("h100-sxm", 8, 8)
    assert serve["tokens_per_s_per_user"] >= 20 and serve["meets_load"] is True
    per_hour = Decimal(serve["price_per_gpu_hour"]) * 8
    assert Decimal(serve["cost"]) == (per_hour * 730).quantize(Decimal("0.01"))
    # The month's bill over the load's 50M tokens a day, not over what the GPUs could make.
    at_load = per_hour / (Decimal(repr(50e6 / 86400)) * 3600) * 10**6
    assert Decimal(serve["cost_per_million_output_tokens_at_load"]) == at_load.quantize(
        Decimal("0.000001"))
    assert Decimal(serve["cost_per_million_output_tokens"]) < at_load
    # One GPU vs cluster by $/M: every TP plan of the 8 GPUs, cheapest first.
    plans = serving["serving_plans"]
    assert [p["tensor_parallel"] for p in plans] == [8, 4, 2]
    assert "needs at least 2 GPUs" in serving["single_gpu_note"]
    # The seed's question needs 2x H200 and 4x A100 in one instance; this store has neither.
    sides = {s["gpu"]: s for s in serving["versus"]["sides"]}
    assert sides["h200"]["at_slo"] is None and sides["h200"]["at_slo_note"] == (
        "no on-demand NVIDIA H200 SXM 141GB offer is priced this week")
    # In words a finance reader follows, never the sizing engine's message (issue 29).
    note = sides["a100-80gb"]["at_slo_note"]
    assert note.startswith("no on-demand offer holds 4× NVIDIA A100 SXM 80GB in one node")
    assert "tensor-parallel group" not in note and "TP stays" not in note
    pretrain = recs["Pre-train a 7B model on 1T tokens"]
    # 720 h deadline: 64 H100s (8 InfiniBand nodes) meet it; one node would take 4 months.
    assert (pretrain["best"]["gpu"], pretrain["best"]["count"]) == ("h100-sxm", 64)
    assert pretrain["best"]["instances"] == 8
    assert pretrain["fewest_gpus"]["count"] == 8
    assert pretrain["fewest_gpus"]["wall_hours"] > 720


def test_no_data_week(report_db, report_config):
    doc = build_report(report_db, report_config, "2026-W20", now=NOW)
    assert doc["prices"]["count"] == 0
    assert doc["key_figures"] == [] and doc["trends"]["charts"] == []
    assert doc["summary"]["items"][0] == {"kind": "no_data"}


def test_running_week_is_reported_as_of_now(report_db, report_config):
    now = datetime(2026, 11, 27, 18, tzinfo=UTC)
    doc = build_report(report_db, report_config, WEEK, now=now)
    assert doc["period"]["as_of"] == "2026-11-27T18:00:00Z"
    assert doc["period"]["complete"] is False
    assert doc["trends"]["times"][-1] == "2026-11-27T18:00:00Z"


def test_default_week_is_the_newest_finished_week_with_data(report_db, report_config):
    doc = build_report(report_db, report_config, None, now=datetime(2027, 3, 1, tzinfo=UTC))
    assert doc["week"] == "2026-W49"  # the newest price (1 Dec) is in week 49
    doc = build_report(report_db, report_config, None, now=datetime(2026, 12, 2, tzinfo=UTC))
    assert doc["week"] == "2026-W48"


def test_weeks():
    week = Week.parse("2026-W48")
    assert (week.start, week.end) == (datetime(2026, 11, 23, tzinfo=UTC),
                                      datetime(2026, 11, 30, tzinfo=UTC))
    assert str(Week.parse("2026w1")) == "2026-W01"
    assert str(Week.containing(datetime(2027, 1, 2, tzinfo=UTC))) == "2026-W53"
    assert default_week(datetime(2026, 12, 2, tzinfo=UTC), None) == week
    with pytest.raises(InvalidInput, match="2026-W48"):
        Week.parse("last week")
    with pytest.raises(InvalidInput, match="no ISO week 54"):
        Week.parse("2026-W54")
    with pytest.raises(InvalidInput, match="has not started"):
        week.as_of(datetime(2026, 11, 1, tzinfo=UTC))


def test_helpers():
    from decimal import Decimal

    assert exact_rank([Decimal("2.5"), Decimal("1"), Decimal("2.50"), Decimal("0.1")]) == [
        2, 1, 2, 0]
    assert pct_change(Decimal("2.29"), Decimal("2.49")) == -8.03
    assert pct_change(Decimal("1"), Decimal("0")) is None
    times = sample_times(datetime(2026, 1, 1, 12, tzinfo=UTC), datetime(2026, 1, 3, 6, tzinfo=UTC))
    assert times == [datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 3, tzinfo=UTC),
                     datetime(2026, 1, 3, 6, tzinfo=UTC)]


def test_bad_workload_config_is_reported_not_fatal(report_db, report_config):
    report_config.report.workloads = [
        {"name": "broken", "kind": "dance", "model": "llama-3.1-8b"},
        {"name": "unknown model", "kind": "pretrain", "model": "llama-99b", "tokens": 1e9},
    ]
    doc = build_report(report_db, report_config, WEEK, now=NOW)
    entries = {w["name"]: w for w in doc["recommendations"]["workloads"]}
    assert "kind must be one of" in entries["broken"]["error"]
    assert "llama-99b" in entries["unknown model"]["error"]


def test_same_document_on_every_database(any_db_url, report_db, report_config):
    """SQLite and PostgreSQL (when GPU_TRACKER_TEST_POSTGRES_URL is set) give the same JSON."""
    from tests.reports.conftest import fill
    from tracker.core.serialization import canonical_json
    from tracker.store.db import open_database

    db = open_database(any_db_url)
    try:
        fill(db)
        doc = build_report(db, report_config, WEEK, now=NOW)
    finally:
        db.close()
    reference = build_report(report_db, report_config, WEEK, now=NOW)
    assert canonical_json(doc) == canonical_json(reference)


def test_timezone_is_shown_next_to_utc(report_db, report_config):
    from reports.render import render_html

    report_config.report.timezone = "America/New_York"
    doc = build_report(report_db, report_config, WEEK, now=NOW)
    assert doc["period"]["timezone"] == "America/New_York"
    assert "2026-11-29 19:00 America/New_York" in render_html(doc)
    report_config.report.timezone = "Mars/Olympus"
    with pytest.raises(InvalidInput, match="not an IANA time zone"):
        build_report(report_db, report_config, WEEK, now=NOW)
