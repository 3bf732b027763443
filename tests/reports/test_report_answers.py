"""Issue 29, the report: every figure true and unambiguous -- the index table's dates, the trend
charts' legend and caption, rent vs buy without a CLI error, the time-cost trade-off of the
pick, and the appendix's serving money (which per-token figure to budget with)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from reports.build import build_report
from reports.render import render_html
from tests.reports.conftest import NOW, WEEK


@pytest.fixture
def document(report_db, report_config):
    return build_report(report_db, report_config, WEEK, now=NOW)


def _chart(providers: int) -> dict:
    names = [f"p{i}" for i in range(providers)]
    return {"chart_id": "trend-x", "gpu": "h100-sxm", "gpu_name": "NVIDIA H100 SXM 80GB",
            "series": [{"provider": n, "bucket": b, "prices": [Decimal(i + 1)] * 3}
                       for i, n in enumerate(names) for b in ("on_demand", "spot")],
            "finding": {}, "providers_total": providers}


def test_the_trend_legend_has_one_entry_per_provider_and_one_per_style():
    from reports.charts import figure

    fig = figure(_chart(6), ["2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z",
                             "2026-11-22T00:00:00Z"], "USD")
    [legend] = fig.legends
    labels = [t.get_text().lstrip("\u200b") for t in legend.get_texts()]
    # Landed main: twelve entries ("p0 on-demand", "p0 spot", ...) under a 3.6 in figure.
    assert labels == [f"p{i}" for i in range(6)] + ["on-demand", "spot (dashed)"]


def test_the_trend_caption_says_which_lines_are_shown():
    from reports.sections.trends import _lines_note

    # Landed main: "Lines shown for the 7 cheapest of 10 providers" -- the lines were the
    # three big clouds plus the cheapest, counted over both buckets.
    note = _lines_note({"on_demand": {"providers": 10, "lines": 6,
                                      "always": ["aws", "azure", "gcp"]},
                        "spot": {"providers": 4, "lines": 4, "always": []}})
    assert note == ("Lines shown, on-demand: 6 of 10 providers (aws, azure, gcp always, then "
                    "the cheapest at the window's end).")
    assert _lines_note({"on_demand": {"providers": 3, "lines": 3, "always": []}}) is None


def test_the_index_table_labels_each_row_with_its_own_day(document):
    chart = document["market"]["index"]["charts"][0]
    chart["latest"]["date"] = "2026-11-24"  # the newest day with fresh prices
    html = render_html(document)
    assert "Index on its latest day with fresh prices, up to 2026-11-29" in html
    market = html[html.index('id="market"'):]
    found = re.search(r"<tr><th scope=\"row\">" + re.escape(chart["gpu_name"])
                      + r"</th>(.*?)</tr>", market)
    assert found is not None
    row = found.group(1)
    assert "2026-11-24" in row and "no fresh prices since" in row


def test_rent_vs_buy_without_a_purchase_price_is_a_sentence_not_a_cli_error(document):
    from tracker.answers.recommend_shared import rent_vs_buy
    from tracker.answers.workloads import Workload
    from tracker.economics.defaults import EconomicsSettings

    workload = Workload.parse({"name": "x", "kind": "pretrain", "model": "llama-3.1-8b",
                               "tokens": 1e12})
    answer = rent_vs_buy(workload, {"gpu": "b200", "count": 8, "gpu_name": "NVIDIA B200"}, [],
                         EconomicsSettings(None))
    assert answer["available"] is False and answer["reason"] == "no_capex"
    # Landed main: "no capex default for b200; pass --capex (defaults exist for: ...)".
    assert "--capex" not in answer["note"] and "pass" not in answer["note"]
    assert answer["note"].startswith("Left out: the purchase price of NVIDIA B200")
    assert "[economics.capex_per_gpu] b200" in answer["note"]


def test_the_pick_weighs_time_against_cost_and_says_so(document):
    recs = {w["name"]: w for w in document["recommendations"]["workloads"]}
    finetune = recs["Fine-tune Llama 3.1 8B on 2B tokens, weekly"]
    trade = finetune["trade_off"]
    # 8 GPUs take 7.4 h of a 24 h deadline: kept, and the 64-GPU run at +$0.04 is named.
    assert trade["switched"] is False and finetune["best"]["count"] == 8
    assert (trade["faster"]["count"], Decimal(trade["extra_cost"])) == (64, Decimal("0.04"))
    html = render_html(document)
    assert "finishes 6.4 h sooner" in html
    assert "it leaves more than half of the 24.0 h deadline free" in html


def test_the_appendix_says_which_serving_figure_to_budget_with(document):
    html = render_html(document)
    appendix = html[html.index('id="appendix"'):]
    serving = appendix[appendix.index("Serve "):]
    serving = serving[:serving.index("</dl>")]
    # Landed main: "0.00 runs/month" and a monthly cost after the per-million formula.
    assert "runs/month" not in serving
    assert "Cost per month" in serving and "Cost per million output tokens" in serving
    assert "Budget with" in serving
