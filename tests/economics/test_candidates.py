"""tracker.answers.candidates: every way to run a workload on the offers, sized and priced."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from decimal import Decimal

from tracker.answers.candidates import candidate_counts, group_absent, node_size, priced_options
from tracker.economics.cost import BillingRule
from tracker.sizing import SizingRequest, size_workload
from tracker.store.queries import PriceRow, per_gpu

T = datetime(2026, 11, 23, tzinfo=UTC)
PER_SECOND = BillingRule(1, 0)


def row(offer_id: int, provider: str, gpu: str, count: float, price: str,
        category: str = "on-demand", cluster: str | None = "infiniband",
        cluster_gbps: float | None = 3200.0) -> PriceRow:
    """A hand-made offer row (no capture: the store's own type). Clustered unless told."""
    p = Decimal(price)
    return PriceRow(
        offer_id=offer_id, source="test", provider=provider, region="r", zone="",
        instance_type=f"{provider}-{count:g}x", variant="", gpu=gpu, gpu_raw=gpu,
        gpu_count=count, category=category, price_per_hour=p,
        price_per_gpu_hour=per_gpu(p, count), currency="USD", observed_at=T, last_seen=T,
        vcpus=None, ram_gb=None, attributes={}, cluster_network=cluster,
        cluster_gbps=cluster_gbps if cluster else None,
        network_note="test fabric" if cluster else "independent hosts, no cluster network")


def billing(_provider: str) -> tuple[BillingRule, str]:
    return PER_SECOND, "test"


def test_candidate_counts_double_each_instance_size():
    assert candidate_counts([8.0, 1.0, 0.5, 2.0], 16) == [1, 2, 4, 8, 16]
    assert candidate_counts([8.0], 64) == [8, 16, 32, 64]
    assert candidate_counts([3.0], 10) == [3, 6]


def test_node_size_is_the_instance_capped_by_request():
    assert node_size(row(1, "a", "h100-sxm", 8, "20")) == 8
    assert node_size(row(1, "a", "h100-sxm", 8, "20"), 4) == 4
    assert node_size(row(1, "a", "h100-sxm", 0.5, "1")) == 1


SIZING = {"model": "llama-3.1-8b", "workload": "full-finetune", "sharding": "zero3",
          "tokens": 2e9}


def test_each_offer_is_sized_with_its_instance_as_the_node():
    rows = sorted([row(1, "eight", "h100-sxm", 8, "24"), row(2, "one", "h100-sxm", 1, "3.1")],
                  key=lambda r: r.price_per_gpu_hour)
    options, skipped = priced_options(rows, SIZING, billing=billing, max_gpus=8,
                                      gpu_counts=[8])
    assert skipped == []
    by_provider = {o.offer.provider: o for o in options}
    assert {p: o.instances for p, o in by_provider.items()} == {"eight": 1, "one": 8}
    for provider, node in (("eight", 8), ("one", 1)):
        expected = size_workload(SizingRequest(gpu="h100-sxm", count=8, gpus_per_node=node,
                                               cluster_gbps=3200.0, **SIZING))
        option = by_provider[provider]
        assert option.wall_hours == float(expected.wall_hours)
        # cost = GPUs x price per GPU-hour x wall hours (per-second billing, rounded up)
        assert abs(option.cost - option.offer.price_per_gpu_hour * 8
                   * Decimal(repr(option.wall_hours))) < Decimal("0.01")
    assert options == sorted(options, key=lambda o: o.cost)


def test_counts_that_do_not_fit_are_left_out():
    options, skipped = priced_options([row(1, "a", "l4", 1, "0.8")], SIZING, billing=billing,
                                      max_gpus=4)
    assert (options, skipped) == ([], [])  # a full fine-tune of 8B does not fit 4 x L4


def test_gpus_without_compute_specs_are_explained():
    # Every bundled class has figures now (tests/test_gpu_coverage.py); a class known only by
    # its memory (tracker.core.gpus.set_gpu_overrides, as a [gpus.<id>] table would add one) has
    # none.
    from tracker.core.gpus import set_gpu_overrides

    set_gpu_overrides({"bare-card": {"memory_gb": 24}})
    serve_1b = {"model": "llama-3.2-1b", "workload": "inference", "tokens": 1e6}
    options, skipped = priced_options([row(2, "b", "bare-card", 1, "1.01")], serve_1b,
                                      billing=billing, max_gpus=4)
    assert options == []
    assert len(skipped) == 1 and skipped[0].startswith("bare-card x")
    assert "no time estimate" in skipped[0]


def test_one_option_per_provider_and_category_per_count():
    rows = [row(1, "a", "h100-sxm", 8, "20"), row(2, "a", "h100-sxm", 8, "22"),
            row(3, "a", "h100-sxm", 8, "12", category="spot")]
    rows.sort(key=lambda r: r.price_per_gpu_hour)
    options, _ = priced_options(rows, SIZING, billing=billing, max_gpus=8)
    assert [(o.offer.offer_id, o.count) for o in options] == [(3, 8), (1, 8)]


def test_instances_without_a_cluster_network_are_never_joined():
    rows = [row(1, "market", "h100-sxm", 1, "2.0", cluster=None),
            row(2, "hgx", "h100-sxm", 8, "24")]
    absent: list[str] = []
    options, _skipped = priced_options(rows, SIZING, billing=billing, max_gpus=16,
                                       absent=absent)
    assert {(o.offer.provider, o.count) for o in options if o.offer.provider == "market"} \
        <= {("market", 1)}
    assert all(o.instances == 1 or o.offer.cluster_network for o in options)
    assert absent == ["market market-1x: independent hosts, no cluster network"]
    assert group_absent([*absent, "market market-2x: independent hosts, no cluster network"]) \
        == ["market market-1x, market-2x: independent hosts, no cluster network"]
    # The 8-GPU offer with a fabric still spans instances.
    assert any(o.offer.provider == "hgx" and o.instances == 2 for o in options)


def test_overrides_and_allow_unclustered_are_visible_on_the_option():
    from tracker.core.fabric import parse_overrides

    rows = [row(1, "market", "h100-sxm", 1, "2.0", cluster=None)]
    allowed, _ = priced_options(rows, SIZING, billing=billing, max_gpus=8,
                                allow_unclustered=True, gpu_counts=[8])
    assert allowed and allowed[0].instances == 8
    assert "--allow-unclustered" in allowed[0].override and allowed[0].cluster_network == "tcp"
    overrides = parse_overrides({"overrides": {"market": {"cluster_network": "roce",
                                                          "cluster_gbps": 400}}})
    over, _ = priced_options(rows, SIZING, billing=billing, max_gpus=8, overrides=overrides,
                             gpu_counts=[8])
    assert over[0].override == "config override market: roce 400 Gb/s"
    # A faster fabric gives a faster (or equal) run than plain TCP.
    assert over[0].wall_hours <= allowed[0].wall_hours


def test_the_same_gpu_on_a_pcie_node_prices_slower_than_on_nvlink():
    from dataclasses import replace

    nvlink = row(1, "hgx", "a100-80gb", 8, "16")
    pcie = replace(nvlink, offer_id=2, provider="pcie", node_link="pcie", node_link_gbps=31.0)
    nvlink = replace(nvlink, node_link="nvlink3", node_link_gbps=300.0)
    sizing = {"model": "llama-3.1-8b", "workload": "full-finetune", "tokens": 2e9,
              "tensor_parallel": 8, "pipeline_parallel": 1}
    options, _ = priced_options([nvlink, pcie], sizing, billing=billing, max_gpus=8,
                                gpu_counts=[8])
    hours = {o.offer.provider: o.wall_hours for o in options}
    assert hours["pcie"] > hours["hgx"] * 1.2


def test_shared_sizing_answers_the_same_question_of_the_same_rows_once(monkeypatch):
    """The report asks this week's rows again for the cost-per-job index's last day (issue
    #26): inside shared_sizing the second ask prices nothing; other rows are priced anew."""
    from tracker.answers.candidates import serving_options, shared_sizing
    from tracker.economics import cost, serving
    from tracker.sizing.serving import ServingSpec

    priced: list[int] = []
    served: list[int] = []
    run_cost, serving_cost = cost.run_cost, serving.serving_cost
    monkeypatch.setattr(cost, "run_cost", lambda *a, **k: priced.append(1) or run_cost(*a, **k))
    monkeypatch.setattr(serving, "serving_cost",
                        lambda *a, **k: served.append(1) or serving_cost(*a, **k))
    rows = sorted([row(1, "eight", "h100-sxm", 8, "24"), row(2, "one", "h100-sxm", 1, "3.1"),
                   row(3, "solo", "h100-sxm", 1, "2.9", cluster=None)],
                  key=lambda r: r.price_per_gpu_hour)
    spec = ServingSpec(prompt_tokens=1000, output_tokens=1000, max_tpot_ms=50)
    serve_sizing = {"model": "llama-3.1-8b"}
    with shared_sizing():
        absent: list[str] = []
        first = priced_options(rows, SIZING, billing=billing, max_gpus=8, absent=absent)
        once = len(priced)
        first_served = serving_options(rows, serve_sizing, spec, max_gpus=8,
                                       hours_per_month=Decimal(730))
        served_once = len(served)
        again: list[str] = ["solo solo-1x: independent hosts, no cluster network"]
        second = priced_options(list(rows), SIZING, billing=billing, max_gpus=8, absent=again)
        second_served = serving_options(list(rows), serve_sizing, spec, max_gpus=8,
                                         hours_per_month=Decimal(730))
        assert (len(priced), len(served)) == (once, served_once) and once and served_once
        assert second == first and second_served == first_served
        assert absent == ["solo solo-1x: independent hosts, no cluster network"] == again
        # The same offers as other row objects: asked anew.
        copies = [dataclasses.replace(r) for r in rows]
        assert priced_options(copies, SIZING, billing=billing, max_gpus=8)[0] == first[0]
        assert len(priced) == 2 * once


def test_cheapest_only_serves_less_and_ranks_the_same_first_option(monkeypatch):
    """serving_options(cheapest_only=True) with a load: the same first option as every option
    ranked, from fewer sized deployments (an offer whose hour's bill over the load's tokens
    is above a cheaper option found is not served), and no option it could not rank first."""
    from tracker.answers.candidates import serving_options
    from tracker.sizing import serving as sizing_serving
    from tracker.sizing.serving import ServingSpec

    calls: list[tuple[str, int]] = []
    serve = sizing_serving.serve
    monkeypatch.setattr(sizing_serving, "serve", lambda req, *a, **k: calls.append(
        (req.gpu, req.count)) or serve(req, *a, **k))
    rows = sorted([row(1, "eight", "h100-sxm", 8, "24"), row(2, "one", "h100-sxm", 1, "3.1"),
                   row(3, "h200s", "h200", 8, "20"), row(4, "dear", "b200", 8, "80"),
                   row(5, "cheap", "a100-80gb", 8, "8"), row(6, "four", "l40s", 4, "4")],
                  key=lambda r: r.price_per_gpu_hour)
    spec = ServingSpec(prompt_tokens=1000, output_tokens=1000, max_tpot_ms=50,
                       output_tokens_per_day=50_000_000)
    sizing = {"model": "llama-3.1-70b"}
    every, _ = serving_options(rows, sizing, spec, max_gpus=16, hours_per_month=Decimal(730))
    served_every = len(calls)
    calls.clear()
    from tracker.answers import candidates

    looked: list[str] = []
    firsts = candidates._serving_firsts
    monkeypatch.setattr(candidates, "_serving_firsts", lambda gpu_rows, node: looked.append(
        gpu_rows[0].gpu) or firsts(gpu_rows, node))
    first, _ = serving_options(rows, sizing, spec, max_gpus=16, hours_per_month=Decimal(730),
                               cheapest_only=True)
    # B200 at $10 and H200 at $2.50 per GPU-hour, 8 GPUs an instance: not even looked at.
    assert looked == ["a100-80gb", "h100-sxm", "l40s"]
    # 8x A100 at $1/GPU-hour carries the load at $3.84 per million output tokens; 8 GPUs at
    # $2.50 or more cost at least $9.60 at a load of 50M tokens a day: not served.
    assert [(o.gpu, o.count, o.offer.provider) for o in every] == [
        ("a100-80gb", 8, "cheap"), ("h200", 8, "h200s"), ("h100-sxm", 8, "eight"),
        ("b200", 8, "dear")]
    assert first == every[:1]
    assert served_every == 12 and sorted(calls) == [
        ("a100-80gb", 8), ("h100-sxm", 1), ("h100-sxm", 2), ("l40s", 4), ("l40s", 8)]
    # Inside shared_sizing, every option asked before answers it: nothing is served again.
    from tracker.answers.candidates import shared_sizing

    with shared_sizing():
        assert serving_options(rows, sizing, spec, max_gpus=16,
                               hours_per_month=Decimal(730)) == (every, _)
        calls.clear()
        again, _skipped = serving_options(rows, sizing, spec, max_gpus=16,
                                          hours_per_month=Decimal(730), cheapest_only=True)
        assert again == every and calls == []
    # Without a load there is no floor: every option, as without cheapest_only.
    calls.clear()
    no_load = ServingSpec(prompt_tokens=1000, output_tokens=1000, max_tpot_ms=50)
    assert serving_options(rows, sizing, no_load, max_gpus=16, hours_per_month=Decimal(730),
                           cheapest_only=True) == serving_options(
        rows, sizing, no_load, max_gpus=16, hours_per_month=Decimal(730))
