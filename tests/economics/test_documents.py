"""tracker.answers.documents: the economics answers as documents, from plain inputs."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest

from tracker.answers.breakeven_documents import BREAKEVEN_KEYS, breakeven_document, hardware_costs
from tracker.answers.candidates import Option
from tracker.answers.documents import (
    COMPARE_KEYS,
    COST_KEYS,
    SPOT_KEYS,
    as_of_text,
    check_fits,
    compare_rows,
    cost_document,
    spot_document,
    whole_count,
)
from tracker.answers.offers import offer_json
from tracker.core.errors import InvalidInput, NotFound
from tracker.economics.cost import BillingRule, run_cost
from tracker.economics.defaults import Assumption, EconomicsSettings
from tracker.economics.spot import SpotInputs
from tracker.store.queries import PriceRow, per_gpu

D = Decimal
T = datetime(2026, 11, 1, tzinfo=UTC)
NO_WORKLOAD: dict[str, object] = {}


def offer(price: str, *, provider: str = "aws", gpu: str = "h100-sxm", count: float = 8,
          category: str = "on-demand", offer_id: int = 7) -> PriceRow:
    p = D(price)
    return PriceRow(
        offer_id=offer_id, source="catalog", provider=provider, region="us-east-1", zone="",
        instance_type="p5.48xlarge", variant="", gpu=gpu, gpu_raw="H100", gpu_count=count,
        category=category, price_per_hour=p, price_per_gpu_hour=per_gpu(p, count),
        currency="USD", observed_at=T, last_seen=T, vcpus=None, ram_gb=None, attributes={})


@pytest.fixture
def settings() -> EconomicsSettings:
    return EconomicsSettings()


# helpers --------------------------------------------------------------------------------------

def test_as_of_text_is_now_or_iso_utc():
    assert as_of_text(None) == "now"
    assert as_of_text(datetime(2026, 11, 9, 23, 59, 59, tzinfo=UTC)) == "2026-11-09T23:59:59Z"


def test_offer_json_adds_the_offer_id():
    data = offer_json(offer("55.04"))
    assert data["offer_id"] == 7
    assert data["price_per_hour"] == "55.04" and data["price_per_gpu_hour"] == "6.88"
    assert offer_json(None) is None


def test_whole_count():
    assert whole_count(8.0) == 8
    with pytest.raises(InvalidInput, match=r"whole GPU count, got 1\.5; pass --hours"):
        whole_count(1.5)


def test_check_fits_names_what_is_missing():
    check_fits(SimpleNamespace(fits=True, wall_hours=2.0, gpus_needed=1, reason=None), 8, "x")
    with pytest.raises(InvalidInput) as too_small:
        check_fits(SimpleNamespace(fits=False, wall_hours=None, gpus_needed=4, reason=None),
                   1, "h100-sxm")
    assert str(too_small.value) == ("the job does not fit on 1 x h100-sxm: it needs at least 4 "
                                    "GPUs (see `gpu-tracker size`); raise --count")
    with pytest.raises(InvalidInput) as no_time:
        check_fits(SimpleNamespace(fits=True, wall_hours=None, gpus_needed=1, reason="no MFU"),
                   8, "h100-sxm")
    assert str(no_time.value) == ("the sizing engine gave no run time for this job (no MFU); "
                                  "pass --hours")


# cost -----------------------------------------------------------------------------------------

def test_cost_document_given_price_and_hours(settings):
    answer = cost_document(settings, gpu=None, count=1.0, currency="USD", hours=6.0,
                           workload=NO_WORKLOAD, price=D(4), success_rate=D("0.5"))
    data = answer.data
    assert list(data)[:len(COST_KEYS)] == list(COST_KEYS)
    assert data["cost"] == D(24) and data["cost_per_success"] == D(48)
    assert data["expected_attempts"] == 2.0
    assert data["runs_per_day"] == 4
    assert data["offer"] is None and data["flops"] is None and data["count"] == 1
    assert data["billing_source"] == settings.billing(None)[1]
    assert data["warnings"] == []
    assert answer.run.cost == D(24) and answer.offer is None


def test_cost_document_prices_from_the_offer_with_its_billing(settings):
    row = offer("55.04")
    answer = cost_document(settings, gpu="h100-sxm", count=8.0, currency="USD", hours=10.0,
                           workload=NO_WORKLOAD, offer=row, instances=1, provider="lambda")
    assert answer.data["price_per_gpu_hour"] == D("6.88")
    assert answer.data["cost"] == D("550.40")
    assert answer.billing == settings.billing("aws")[0]  # the offer's provider, not --provider
    assert answer.data["offer"]["offer_id"] == 7 and answer.data["instances"] == 1
    assert answer.offer is row


def test_cost_document_billing_flags_override(settings):
    answer = cost_document(settings, gpu=None, count=1.0, currency="USD", hours=1.01,
                           workload=NO_WORKLOAD, price=D(2), billing_seconds=60)
    assert answer.billing == BillingRule(60, 0)
    assert answer.data["billing_source"] == "flag"
    assert answer.data["cost"] == D("2.03")  # 3636 s -> 3660 s billed


def test_cost_document_sizes_the_run_when_no_hours(settings):
    workload = {"params": 7e9, "tokens": 1e9, "mfu": 0.4, "model": None, "workload": "pretrain"}
    answer = cost_document(settings, gpu="h100-sxm", count=8.0, currency="USD", hours=None,
                           workload=workload, price=D(4))
    wall = 6 * 7e9 * 1e9 / (8 * 989e12 * 0.4) / 3600
    assert answer.flops == pytest.approx(6 * 7e9 * 1e9)
    assert answer.data["wall_hours"] == pytest.approx(wall, rel=1e-5)


def test_cost_document_time_to_result_and_flag_pairs(settings):
    answer = cost_document(settings, gpu=None, count=8.0, currency="USD", hours=0.75,
                           workload=NO_WORKLOAD, price=D(4), experiments=10, parallel=3)
    assert answer.data["time_to_result_hours"] == 3.0  # ceil(10 / 3) waves x 0.75 h
    with pytest.raises(InvalidInput, match="--fail-fraction needs --success-rate"):
        cost_document(settings, gpu=None, count=1.0, currency="USD", hours=1.0,
                      workload=NO_WORKLOAD, price=D(2), fail_fraction=D("0.5"))


# spot -----------------------------------------------------------------------------------------

def test_spot_document_carries_inputs_and_plan():
    inputs = SpotInputs(work_hours=500, mtti_node_hours=24, checkpoint_hours=5 / 60,
                        restart_hours=10 / 60, spot_price_per_node_hour=D("17.63"),
                        on_demand_price_per_node_hour=D("55.04"), deadline_hours=600)
    spot_row = offer("17.63", category="spot")
    answer = spot_document(inputs, mtti_source="given", currency="USD", spot_offer=spot_row)
    data = answer.data
    assert list(data)[:len(SPOT_KEYS)] == list(SPOT_KEYS)
    assert data["on_demand_cost"] == D(27520)
    assert data["meets_deadline"] is True
    assert data["mtti_hours"] == 24 and data["mtti_source"] == "given"
    assert data["spot_price_per_hour"] == D("17.63")
    assert data["spot_offer"]["category"] == "spot" and data["on_demand_offer"] is None
    assert answer.plan.expected_wall_hours == pytest.approx(data["expected_wall_hours"])


# breakeven ------------------------------------------------------------------------------------

def test_hardware_costs_from_the_gpu_defaults(settings):
    bought = hardware_costs(settings, gpu="h100-sxm", gpus=D(8), capex=None,
                            networking_per_gpu=None, storage=D(0), install=D(0), power_kw=None)
    assert bought.capex == D(334000)  # 8 x 37,500 + 8 x 4,250 networking
    assert bought.power_kw == D("10.2")
    assert [a.name for a in bought.assumptions] == ["capex_per_gpu", "networking_per_gpu",
                                                    "power_kw"]


def test_hardware_costs_given_capex_adds_only_what_is_given(settings):
    bought = hardware_costs(settings, gpu=None, gpus=D(4), capex=D(100000),
                            networking_per_gpu=D(100), storage=D(1000), install=D(500),
                            power_kw=D(5))
    assert bought.capex == D(101900)
    assert bought.power_kw == D(5) and bought.assumptions == ()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"gpu": None, "capex": None, "power_kw": D(1)},
     "give --capex, or --gpu for the per-GPU hardware default"),
    ({"gpu": "l4", "capex": None, "power_kw": D(1)},
     "no capex default for l4; pass --capex (defaults exist for: h100-sxm, h200)"),
    ({"gpu": None, "capex": D(1), "power_kw": None},
     "give --power-kw (rated IT power), or --gpu with a power default (b200, h100-sxm, h200)"),
])
def test_hardware_costs_without_a_default_says_what_to_give(settings, kwargs, message):
    with pytest.raises(InvalidInput) as error:
        hardware_costs(settings, gpus=D(8), networking_per_gpu=None, storage=D(0),
                       install=D(0), **kwargs)
    assert str(error.value) == message


def test_breakeven_document_seed_case(settings):
    bought = hardware_costs(settings, gpu=None, gpus=D(8), capex=D(300000),
                            networking_per_gpu=None, storage=D(0), install=D(0),
                            power_kw=D(0))
    answer = breakeven_document(
        settings, bought, gpus=D(8), cloud_price_per_hour=D(29), utilization=D(1),
        currency="USD", other_opex_per_month=D(1000), colo_per_kw_month=D(0),
        staff_per_month=D(0), hours_per_month=D(720), residual_fraction=D(0),
        discount_rate=D(0), horizon_months=24, depreciation="sl")
    data = answer.data
    assert list(data)[:len(BREAKEVEN_KEYS)] == list(BREAKEVEN_KEYS)
    assert data["npv"] == D(177120)  # 24 x 19,880 - 300,000
    assert data["discounted_payback_month"] == 16
    assert data["gpus"] == 8 and data["offer"] is None
    # Only the inputs not given are assumptions, each with its source.
    assert [a.name for a in data["assumptions"]] == ["pue", "kwh_price", "power_factor"]
    assert all(isinstance(a, Assumption) and a.source for a in data["assumptions"])
    assert data["warnings"] == list(answer.result.warnings)  # residual given: no horizon note
    assert data["depreciation"] == {"method": "sl", "years": 2,
                                    "per_year": [D(150000), D(150000)]}
    assert answer.sensitivity[0].input == "cloud_price_per_hour"


def test_breakeven_document_warns_about_the_residual_default_off_36_months(settings):
    bought = hardware_costs(settings, gpu=None, gpus=D(8), capex=D(300000),
                            networking_per_gpu=None, storage=D(0), install=D(0),
                            power_kw=D("10.2"))
    answer = breakeven_document(settings, bought, gpus=D(8), cloud_price_per_hour=D("55.04"),
                                utilization=D("0.7"), currency="USD", horizon_months=24)
    assert any("stated for 36 months" in w for w in answer.data["warnings"])
    staff = next(a for a in answer.data["assumptions"] if a.name == "staff_per_month")
    assert staff.value == D(1000) and "x 1 node(s)" in staff.source


# compare --------------------------------------------------------------------------------------

def option(gpu: str, count: int, price: str, wall_hours: float) -> Option:
    row = offer(price, gpu=gpu, count=count)
    run = run_cost(row.price_per_gpu_hour, count, wall_hours)
    return Option(gpu, count, row, 1, SimpleNamespace(wall_hours=wall_hours), run,
                  BillingRule(), "test")


def test_compare_rows_one_row_per_option_up_to_the_limit():
    options = [option("h100-sxm", 8, "31.92", 2.0), option("a100-80gb", 8, "27.447", 4.0)]
    rows = compare_rows(options, skipped=[], priced_gpus=["h100-sxm"], max_gpus=8, as_of=None)
    assert [r["gpu"] for r in rows] == ["h100-sxm", "a100-80gb"]
    assert list(rows[0])[:len(COMPARE_KEYS)] == list(COMPARE_KEYS)
    assert rows[0]["cost"] == D("63.84") and rows[0]["gpu_hours"] == 16.0
    assert rows[0]["offer_id"] == 7 and rows[0]["price_per_gpu_hour"] == D("3.99")
    limited = compare_rows(options, skipped=[], priced_gpus=[], max_gpus=8, as_of=None,
                           limit=1)
    assert len(limited) == 1


def test_compare_rows_none_fitting_is_not_found():
    with pytest.raises(NotFound) as error:
        compare_rows([], skipped=["l4: unknown model", "a", "b", "c"],
                     priced_gpus=["l4", "h100-sxm", "l4"], max_gpus=2,
                     as_of=datetime(2026, 11, 1, tzinfo=UTC))
    assert str(error.value) == (
        "no priced GPU count up to 2 fits this workload as of 2026-11-01T00:00:00Z; GPUs with "
        "prices: h100-sxm, l4 (l4: unknown model; a; b)")
