"""The per-offer path, kept for the tests and bench/price_many.py only: `priced_options` and
`serving_options` as main had them at 633dacb (before the size-once path), each offer sized
(memoised per node shape) and priced in its own loop. The size-once answers must equal these,
every figure, to the cent (tests/economics/test_price_many.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from tracker.answers.candidates import (
    Option,
    ServingOption,
    _absent_line,
    _per_gpu,
    _rack_domain,
    node_size,
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
                node = node_size(row, wanted_node)
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
) -> tuple[list[ServingOption], list[str]]:
    """(options, skipped): every GPU, count, TP plan and offer that serves the workload at the
    service level (and carries the load, when one is given and `require_load`), cheapest per
    million output tokens first; one option per GPU, provider, category and instance size (the
    best GPU count of each: more replicas of the same plan cost the same per token).

    Each offer's instance is the node (TP stays inside it, or inside its NVLink domain where
    that spans instances: data/fabric.json `scale_up_domain`), as in `priced_options`. With
    explicit `gpu_counts`, an instance larger than the count also holds the deployment (2 x
    H200 inside an 8-GPU node, over its NVLink): the option says so in `billed_gpus`.
    """
    from tracker.core.fabric import effective_cluster, offer_scale_up_domain
    from tracker.economics.cost import tiling_offer
    from tracker.economics.serving import serving_cost
    from tracker.sizing import SizingRequest
    from tracker.sizing.serving import serve

    wanted_node = sizing.get("gpus_per_node")
    options: list[ServingOption] = []
    skipped: list[str] = []
    for gpu, gpu_rows, counts in _per_gpu(rows, gpu_counts, max_gpus):
        served: dict[tuple[Any, ...], Any] = {}
        failed_nodes: set[int] = set()
        # Without a cluster network a replica stays in its instance (or NVLink domain): a
        # (node, links) that cannot serve at a count reaching its largest group cannot at any
        # larger count either, the replica plans and their service level being the same.
        hopeless: set[tuple[Any, ...]] = set()
        rack = _rack_domain(gpu)
        # The best count per provider, category and instance size: replicas scale the
        # throughput and the price alike, so a larger count only wins when the load needs it.
        best: dict[tuple[str, str, int], ServingOption] = {}
        for count in counts:
            # Rows come cheapest per GPU-hour first, and a (count, node) serves the same
            # whatever the price: the first tiling row per provider, category and node is the
            # cheapest of its kind, the rest cannot win.
            priced: set[tuple[str, str, int]] = set()
            for row in gpu_rows:
                node = node_size(row, wanted_node)
                kind = (row.provider, row.category, node)
                if kind in priced:
                    continue
                tiled = tiling_offer([row], float(count))
                billed = None
                if tiled is None and gpu_counts is not None and node > count:
                    # The asked-for count inside one larger instance: priced per GPU as the
                    # deployment uses it, the whole instance's bill said beside it.
                    tiled, billed = (row, 1), node_size(row)
                if tiled is None:
                    continue
                priced.add(kind)
                # The offer's link inside the instance carries the TP all-reduces; replicas
                # are independent, so only a replica whose pipeline stages span instances
                # needs the cluster network (a one-line refusal where the offer has none).
                cluster, gbps, _override = effective_cluster(row.provider, row.instance_type,
                                                             row.network)
                domain = offer_scale_up_domain(row.provider, row.instance_type)
                links = (node, row.node_link, row.node_link_gbps, cluster, gbps, domain)
                key = (count, *links)
                if key not in served and links in hopeless:
                    served[key] = None
                if key not in served:
                    try:
                        served[key] = serve(SizingRequest(
                            gpu=gpu, count=count, **{**sizing, "gpus_per_node": node,
                                                     "node_link": row.node_link,
                                                     "node_link_gbps": row.node_link_gbps,
                                                     "cluster_gbps": gbps,
                                                     "scale_up_domain": domain}),
                            spec, cluster_network=cluster is not None)
                    except (InvalidInput, NotFound) as exc:
                        served[key] = None
                        if cluster is None and count >= max(node, domain or 1, rack):
                            hopeless.add(links)
                        if node not in failed_nodes:
                            failed_nodes.add(node)
                            skipped.append(f"{gpu} in instances of {node}: {exc}")
                result = served[key]
                if result is None or (require_load and result.meets_load is False):
                    continue
                chosen = result.chosen
                cost = serving_cost(
                    price_per_gpu_hour=row.price_per_gpu_hour, gpus=count,
                    output_tokens_per_s=result.output_tokens_per_s,
                    prompt_tokens=result.prompt_tokens, output_tokens=result.output_tokens,
                    hours_per_month=hours_per_month,
                    load_output_tokens_per_s=result.load_output_tokens_per_s,
                    replica_gpus=chosen.tensor_parallel * chosen.pipeline_parallel,
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
