"""The per-offer path, kept for the tests and bench/price_many.py only: `priced_options` as
main had it at 633dacb (before the size-once path), each offer sized (memoised per node shape)
and priced in its own loop, and `serving_options` by brute force (every row at every count).
The size-once answers must equal these, every figure, to the cent
(tests/economics/test_price_many.py). One change since: an offer's node is capped by its GPU
class's host when --gpus-per-node is not given (`offer_node`: a GB200/GB300 instance larger
than its 4-GPU compute tray is several hosts)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from tracker.answers.candidates import (
    Option,
    ServingOption,
    _absent_line,
    _per_gpu,
    node_size,
    offer_node,
)
from tracker.core.errors import InvalidInput, NotFound
from tracker.core.fabric import Override
from tracker.economics.cost import BillingRule
from tracker.sizing import SizingResult
from tracker.store.queries import PriceRow


def _note_absent(absent: list[str], row: PriceRow) -> None:
    line = _absent_line(row)
    if line not in absent:
        absent.append(line)


def per_offer_priced_options(
    rows: Sequence[PriceRow], sizing: Mapping[str, Any], *,
    billing: Callable[[str], tuple[BillingRule, str]], max_gpus: int,
    gpu_counts: Iterable[int] | None = None, overrides: Mapping[str, Override] | None = None,
    allow_unclustered: bool = False, absent: list[str] | None = None,
) -> tuple[list[Option], list[str]]:
    """(options, skipped): the cheapest run per GPU, count, provider and category.

    `rows` come cheapest per GPU-hour first (as `store.price_rows` returns them); `sizing`
    holds SizingRequest fields (model, workload, tokens, ...) without gpu and count.
    `gpu_counts` replaces the candidate counts (any count the instances tile exactly).
    `skipped` explains GPUs that could not be sized or timed. `absent`, when given, receives
    one line per offer whose larger counts were left out because its instances cannot be
    joined ("vastai 1x-B200: independent hosts, no cluster network").
    """
    from tracker.core.fabric import effective_cluster, offer_scale_up_domain
    from tracker.economics.cost import run_cost, tiling_offer
    from tracker.sizing import SizingRequest, size_workload

    wanted_node = sizing.get("gpus_per_node")
    options: list[Option] = []
    skipped: list[str] = []
    for gpu, gpu_rows, counts in _per_gpu(rows, gpu_counts, max_gpus):
        sized: dict[tuple, SizingResult] = {}
        unusable = False
        for count in counts:
            best: dict[tuple[str, str], Option] = {}
            for row in gpu_rows:
                tiled = tiling_offer([row], float(count))
                if tiled is None:
                    continue
                kind, gbps, override = effective_cluster(
                    row.provider, row.instance_type, row.network, overrides, allow_unclustered)
                if tiled[1] > 1 and kind is None:
                    if absent is not None:
                        _note_absent(absent, row)
                    continue
                node = offer_node(row, wanted_node)
                domain = offer_scale_up_domain(row.provider, row.instance_type)
                links = {"gpus_per_node": node, "node_link": row.node_link,
                         "node_link_gbps": row.node_link_gbps, "cluster_gbps": gbps,
                         "scale_up_domain": domain}
                key = (count, node, row.node_link, row.node_link_gbps, gbps, domain)
                if key not in sized:
                    try:
                        sized[key] = size_workload(SizingRequest(
                            gpu=gpu, count=count, **{**sizing, **links}))
                    except (InvalidInput, NotFound) as exc:
                        skipped.append(f"{gpu}: {exc}")
                        unusable = True
                        break
                result = sized[key]
                if not result.fits:
                    continue
                if result.wall_hours is None or result.wall_hours <= 0:
                    skipped.append(f"{gpu} x{count}: no time estimate "
                                   f"({'; '.join(result.warnings) or 'no reason given'})")
                    unusable = True
                    break
                rule, source = billing(row.provider)
                run = run_cost(row.price_per_gpu_hour, float(count), float(result.wall_hours),
                               rule)
                spans = tiled[1] > 1
                pick = (row.provider, row.category)
                if pick not in best or run.cost < best[pick].cost:
                    best[pick] = Option(gpu, count, row, tiled[1], result, run, rule, source,
                                        kind if spans else None,
                                        override if spans else None)
            if unusable:
                break
            options.extend(best.values())
    options.sort(key=lambda o: (o.cost, o.wall_hours, o.gpu, o.count, o.offer.provider,
                                o.offer.category, o.offer.region, o.offer.instance_type))
    return options, skipped


def per_offer_serving_options(
    rows: Sequence[PriceRow], sizing: Mapping[str, Any], spec: Any, *, max_gpus: int,
    hours_per_month: Decimal, gpu_counts: Iterable[int] | None = None,
    api_price_per_million_input: Decimal | None = None,
    api_price_per_million_output: Decimal | None = None, require_load: bool = True,
    cheapest_only: bool = False,
) -> tuple[list[ServingOption], list[str]]:
    """(options, skipped) as `candidates.serving_options` answers them, by brute force: every
    row at every count is served and priced, and the best option per GPU, provider, category
    and instance size kept. None of the size-once path's pruning is here (the first row per
    kind, the counts a node shape cannot serve at any larger size), so the equality test
    checks that pruning; only `serve` itself is memoised, on every input it reads.
    `cheapest_only` changes nothing here: every option is answered, the first among them.
    """
    from tracker.core.fabric import effective_cluster, offer_scale_up_domain
    from tracker.economics.cost import tiling_offer
    from tracker.economics.serving import serving_cost
    from tracker.sizing import SizingRequest
    from tracker.sizing.serving import serve

    wanted_node = sizing.get("gpus_per_node")
    options: list[ServingOption] = []
    skipped: list[str] = []
    served: dict[tuple[Any, ...], Any] = {}
    for gpu, gpu_rows, counts in _per_gpu(rows, gpu_counts, max_gpus):
        failed_nodes: set[int] = set()
        best: dict[tuple[str, str, int], ServingOption] = {}
        for count in counts:
            for row in gpu_rows:
                node = offer_node(row, wanted_node)
                tiled = tiling_offer([row], float(count))
                billed = None
                if tiled is None and gpu_counts is not None and node > count:
                    tiled, billed = (row, 1), node_size(row)
                if tiled is None:
                    continue
                cluster, gbps, _override = effective_cluster(row.provider, row.instance_type,
                                                             row.network)
                domain = offer_scale_up_domain(row.provider, row.instance_type)
                links = {"gpus_per_node": node, "node_link": row.node_link,
                         "node_link_gbps": row.node_link_gbps, "cluster_gbps": gbps,
                         "scale_up_domain": domain}
                key = (gpu, count, cluster is not None, *links.values())
                if key not in served:
                    try:
                        served[key] = serve(SizingRequest(gpu=gpu, count=count,
                                                          **{**sizing, **links}),
                                            spec, cluster_network=cluster is not None)
                    except (InvalidInput, NotFound) as exc:
                        served[key] = exc
                result = served[key]
                if isinstance(result, Exception):
                    if node not in failed_nodes:
                        failed_nodes.add(node)
                        skipped.append(f"{gpu} in instances of {node}: {result}")
                    continue
                if require_load and result.meets_load is False:
                    continue
                chosen = result.chosen
                cost = serving_cost(
                    price_per_gpu_hour=row.price_per_gpu_hour, gpus=count,
                    output_tokens_per_s=result.output_tokens_per_s,
                    prompt_tokens=result.prompt_tokens, output_tokens=result.output_tokens,
                    hours_per_month=hours_per_month,
                    load_output_tokens_per_s=result.load_output_tokens_per_s,
                    replica_gpus=chosen.replica_gpus,
                    replica_output_tokens_per_s=result.point.output_tokens_per_s,
                    api_price_per_million_input=api_price_per_million_input,
                    api_price_per_million_output=api_price_per_million_output)
                option = ServingOption(gpu, count, row, tiled[1], result, cost, billed)
                slot = (row.provider, row.category, node)
                if slot not in best or option.rank_key < best[slot].rank_key:
                    best[slot] = option
        options.extend(best.values())
    options.sort(key=lambda o: o.rank_key)
    return options, skipped
