"""Every way to run one workload on the stored offers: sized, priced, cheapest first.

The one loop behind `gpu-tracker compare` and the weekly report's recommendations. For each
GPU model, each GPU count that some offer's instances can make up (instance size × 1, 2, 4,
...), and each offer, the sizing engine sizes the job with the offer's instance as the node
(its stored node link inside it, its cluster network between instances) and the economics
engine prices the run. A count that needs several instances is offered only where the offer
has a cluster network (tracker.core.fabric; docs/fabric.md §4), or where a config override or
`allow_unclustered` says otherwise, and then the option carries that override's text.
Pure: the price rows come in as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.core.fabric import Override
    from tracker.economics.cost import BillingRule, RunCost
    from tracker.sizing import SizingResult
    from tracker.store.queries import PriceRow


@dataclass(frozen=True, slots=True)
class Option:
    gpu: str
    count: int
    offer: PriceRow
    instances: int
    sized: SizingResult
    run: RunCost
    billing: BillingRule
    billing_source: str
    cluster_network: str | None = None  # the fabric joining the instances (None: one)
    override: str | None = None  # the config/flag that allowed an unclustered join
    # GPUs the instance bills when the run uses part of one larger instance (2 of an 8-GPU
    # node): the run costs the whole instance; None: the run uses every GPU billed.
    billed_gpus: int | None = None

    @property
    def wall_hours(self) -> float:
        return float(self.sized.wall_hours)

    @property
    def cost(self) -> Decimal:
        return self.run.cost


_SHARED: ContextVar[dict[tuple, tuple[Any, Exception | None]] | None] = ContextVar(
    "shared_sizing", default=None)


@contextmanager
def shared_sizing() -> Iterator[None]:
    """Inside it, `priced_options` and `serving_options` keep each sizing they compute (or the
    error it raised) for every later call asking the same question of the same shape: the
    cost-per-job index asks the same workloads of each day's offers, whose shapes barely
    change from one day to the next. The engines are pure, so a kept answer is the answer.
    Nested, it keeps using the outer one's answers."""
    if _SHARED.get() is not None:
        yield
        return
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _once(key: tuple, compute: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """compute(*args, **kwargs), or inside `shared_sizing` what it returned (or raised) for
    `key` before."""
    memo = _SHARED.get()
    if memo is None:
        return compute(*args, **kwargs)
    if key not in memo:
        try:
            memo[key] = (compute(*args, **kwargs), None)
        except (InvalidInput, NotFound) as exc:
            memo[key] = (None, exc)
    value, error = memo[key]
    if error is not None:
        raise error.with_traceback(None)
    return value


def candidate_counts(instance_sizes: Iterable[float], max_gpus: int) -> list[int]:
    """Whole GPU counts that instances of these sizes make up: each size × 1, 2, 4, ..."""
    counts: set[int] = set()
    for size in set(instance_sizes):
        if size < 1 or size != int(size):
            continue
        n = int(size)
        while n <= max_gpus:
            counts.add(n)
            n *= 2
    return sorted(counts)


def node_size(offer: PriceRow, gpus_per_node: int | None = None) -> int:
    """GPUs that share a node in this offer (capped by an explicit --gpus-per-node)."""
    per_instance = max(1, int(float(offer.gpu_count)))
    return min(per_instance, int(gpus_per_node)) if gpus_per_node else per_instance


def offer_node(offer: PriceRow, gpus_per_node: int | None = None) -> int:
    """The node a plan on this offer uses: its instance, capped by --gpus-per-node or, when
    that is not given, by its GPU class's host (4 on a GB200/GB300 NVL72 tray, else 8)."""
    return node_size(offer, gpus_per_node or _host(offer.gpu))


def _per_gpu(rows: Sequence[PriceRow], gpu_counts: Iterable[int] | None,
             max_gpus: int) -> Iterator[tuple[str, list[PriceRow], list[int]]]:
    """(gpu, its rows, the GPU counts to try) for each GPU in the rows, in id order: the
    given counts, or every count the offers can tile up to `max_gpus`."""
    by_gpu: dict[str, list[PriceRow]] = {}
    for row in rows:
        by_gpu.setdefault(row.gpu, []).append(row)
    for gpu in sorted(by_gpu):
        gpu_rows = by_gpu[gpu]
        counts = (sorted(set(gpu_counts)) if gpu_counts is not None
                  else candidate_counts((float(r.gpu_count) for r in gpu_rows), max_gpus))
        yield gpu, gpu_rows, counts


@dataclass(slots=True)
class _Shape:
    """Offers of one GPU that every plan sizes alike: the same instance size, node, links
    inside it, cluster network between instances (with the override that allowed it) and
    scale-up domain. A run on a shape costs each offer its price per GPU-hour times the same
    GPUs and billed hours, so per provider and category only the shape's cheapest offer (the
    first, rows coming cheapest first) can win."""

    first: int  # index of its first (cheapest) row
    row: PriceRow  # that row: the shape's instance size and links
    node: int
    cluster: str | None
    gbps: float | None
    override: str | None
    domain: int | None
    picks: dict[tuple[str, str], tuple[int, PriceRow]]  # (provider, category) -> first row
    absent: dict[str, int]  # the shape's `absent` lines (unjoinable shapes), first index

    def sizing_key(self, count: int) -> tuple:
        return (count, min(self.node, count), self.row.node_link, self.row.node_link_gbps,
                self.gbps, self.domain)

    def links(self, count: int) -> dict[str, Any]:
        """The sizing's links at `count` GPUs (all inside one node when it holds them)."""
        return {"gpus_per_node": min(self.node, count), "node_link": self.row.node_link,
                "node_link_gbps": self.row.node_link_gbps, "cluster_gbps": self.gbps,
                "scale_up_domain": self.domain}


class _Fabric:
    """What the fabric rules make of an offer (tracker.core.fabric): its cluster network, the
    override that allowed it and its scale-up domain, looked up once per distinct input. The
    instance type enters only where it can change the answer: a provider with scale-up
    domains, a per-instance override, or an unclustered offer joined by allow_unclustered
    (its text names the instance)."""

    def __init__(self, overrides: Mapping[str, Override] | None,
                 allow_unclustered: bool) -> None:
        self.overrides = overrides or {}
        self.allow_unclustered = allow_unclustered
        self.domain_providers = _domain_providers()
        self.found: dict[tuple, tuple[str | None, float | None, str | None, int | None]] = {}

    def of(self, row: PriceRow) -> tuple[str | None, float | None, str | None, int | None]:
        provider, instance = row.provider, row.instance_type
        clustered = row.cluster_network is not None and bool(row.cluster_gbps)
        by_instance = (provider in self.domain_providers
                       or (self.allow_unclustered and not clustered)
                       or f"{provider}/{instance}" in self.overrides)
        key = (provider, instance if by_instance else None, row.cluster_network,
               row.cluster_gbps)
        found = self.found.get(key)
        if found is None:
            from tracker.core.fabric import effective_cluster, offer_scale_up_domain

            found = self.found[key] = (
                *effective_cluster(provider, instance, row.network, self.overrides,
                                   self.allow_unclustered),
                offer_scale_up_domain(provider, instance))
        return found


def _domain_providers() -> frozenset[str]:
    """Providers with instance families in a scale-up domain wider than one instance."""
    from tracker.core.fabric import families

    return frozenset(f.provider for f in families() if f.scale_up_domain)


def by_instance(overrides: Mapping[str, Override] | None = None) -> frozenset[str]:
    """The providers whose instance type can change how `priced_options` or `serving_options`
    size an offer beyond its stored links and network: those with scale-up domains and those
    a `[fabric.overrides]` entry names. `store.queries.price_rows_per_shape` keeps their
    instance types apart (and those of instances no cluster network joins where the question
    names them)."""
    return _domain_providers() | {key.split("/", 1)[0] for key in overrides or {}}


def _shapes(rows: Sequence[PriceRow], wanted_node: int | None, fabric: _Fabric,
            want_absent: bool) -> list[_Shape]:
    """The rows of one GPU grouped by shape, in the order of each shape's first row: one pass
    over the offers."""
    shapes: dict[tuple, _Shape] = {}
    for index, row in enumerate(rows):
        found = fabric.of(row)
        node = node_size(row, wanted_node)
        key = (float(row.gpu_count), node, row.node_link, row.node_link_gbps, *found)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = _Shape(index, row, node, *found, {}, {})
        shape.picks.setdefault((row.provider, row.category), (index, row))
        if want_absent and found[0] is None:
            shape.absent.setdefault(_absent_line(row), index)
    return list(shapes.values())


Step = tuple[int, "str | tuple[_Shape, int, int | None]"]


def _count_steps(shapes: Sequence[_Shape], count: int, noted: set[int], want_absent: bool,
                 larger_instances: bool) -> list[Step]:
    """What the offers do at `count` GPUs, in row order: an `absent` line for each offer
    whose instances would have to be joined without a cluster network (once per shape), and
    (shape, instances, billed GPUs or None) for each shape whose instances tile the count and
    can be joined, or (with `larger_instances`) whose one instance holds more GPUs."""
    from tracker.economics.cost import tiling_offer

    steps: list[Step] = []
    for number, shape in enumerate(shapes):
        tiled = tiling_offer([shape.row], float(count))
        if tiled is None:
            size = float(shape.row.gpu_count)
            if larger_instances and size > count and size == int(size):
                steps.append((shape.first, (shape, 1, int(size))))
            continue
        if tiled[1] > 1 and shape.cluster is None:
            if want_absent and number not in noted:
                noted.add(number)
                steps.extend((index, line) for line, index in shape.absent.items())
            continue
        steps.append((shape.first, (shape, tiled[1], None)))
    steps.sort(key=lambda step: step[0])
    return steps


def _rows_key(rows: Sequence[PriceRow]) -> tuple[int, ...]:
    """The rows as a memo key: which row objects, in which order (the memo keeps them, so
    no other object takes their ids meanwhile). Rows are immutable, so the same row
    objects in the same order are the same offers and prices."""
    return tuple(map(id, rows))


def _billing_key(rows: Sequence[PriceRow],
                 billing: Callable[[str], tuple[BillingRule, str]]) -> tuple:
    """What `billing` says of each provider in the rows (or the error it raises)."""
    said: list[tuple[str, Any]] = []
    for provider in sorted({row.provider for row in rows}):
        try:
            said.append((provider, billing(provider)))
        except InvalidInput as exc:
            said.append((provider, str(exc)))
    return tuple(said)


def priced_options(
    rows: Sequence[PriceRow], sizing: Mapping[str, Any], *,
    billing: Callable[[str], tuple[BillingRule, str]], max_gpus: int,
    gpu_counts: Iterable[int] | None = None, overrides: Mapping[str, Override] | None = None,
    allow_unclustered: bool = False, absent: list[str] | None = None,
    larger_instances: bool = False,
) -> tuple[list[Option], list[str]]:
    """(options, skipped): the cheapest run per GPU, count, provider and category.

    `rows` come cheapest per GPU-hour first (as `store.price_rows` returns them); `sizing`
    holds SizingRequest fields (model, workload, tokens, ...) without gpu and count.
    `gpu_counts` replaces the candidate counts (any count the instances tile exactly).
    `skipped` explains GPUs that could not be sized or timed. `absent`, when given, receives
    one line per offer whose larger counts were left out because its instances cannot be
    joined ("vastai 1x-B200: independent hosts, no cluster network"). With
    `larger_instances`, one instance with more GPUs than the count also runs it (2 GPUs of an
    8-GPU node, over its NVLink), costing what the whole instance bills (`billed_gpus`).

    Sized once per shape (`_Shape`) and count, priced once per shape, provider and category:
    the work grows with the shapes, not with the offers. Inside `shared_sizing`, the same
    question of the same rows is answered once (the report asks this week's rows again for
    the cost-per-job index's last day).
    """
    rows = tuple(rows)
    counts = None if gpu_counts is None else tuple(sorted(set(gpu_counts)))

    def answer() -> tuple[tuple[PriceRow, ...], list[Option], list[str], list[str]]:
        lines: list[str] = []
        found, skipped = _priced_options(
            rows, sizing, billing=billing, max_gpus=max_gpus, gpu_counts=counts,
            overrides=overrides, allow_unclustered=allow_unclustered,
            absent=lines if absent is not None else None, larger_instances=larger_instances)
        return rows, found, skipped, lines

    if _SHARED.get() is None:
        _rows, found, skipped, lines = answer()
    else:
        key = ("priced", repr(sorted(sizing.items())), max_gpus, counts,
               tuple(sorted((overrides or {}).items())), allow_unclustered, larger_instances,
               absent is not None, _billing_key(rows, billing), _rows_key(rows))
        _rows, found, skipped, lines = _once(key, answer)
    if absent is not None:
        seen = set(absent)
        for line in lines:
            if line not in seen:
                seen.add(line)
                absent.append(line)
    return list(found), list(skipped)


def _priced_options(
    rows: Sequence[PriceRow], sizing: Mapping[str, Any], *,
    billing: Callable[[str], tuple[BillingRule, str]], max_gpus: int,
    gpu_counts: Iterable[int] | None, overrides: Mapping[str, Override] | None,
    allow_unclustered: bool, absent: list[str] | None, larger_instances: bool,
) -> tuple[list[Option], list[str]]:
    """priced_options, each time it is asked."""
    from tracker.economics.cost import run_cost
    from tracker.sizing import SizingRequest, size_workload

    wanted_node = sizing.get("gpus_per_node")
    question = ("train", repr(sorted(sizing.items())))
    seen = set(absent or ())
    fabric = _Fabric(overrides, allow_unclustered)
    options: list[Option] = []
    skipped: list[str] = []
    rules: dict[str, tuple[BillingRule, str]] = {}  # what `billing` says of each provider

    def rule_of(provider: str) -> tuple[BillingRule, str]:
        said = rules.get(provider)
        if said is None:
            said = rules[provider] = billing(provider)  # an error: raised, as each time
        return said

    for gpu, gpu_rows, counts in _per_gpu(rows, gpu_counts, max_gpus):
        shapes = _shapes(gpu_rows, wanted_node or _host(gpu), fabric, absent is not None)
        sized: dict[tuple, SizingResult] = {}
        noted: set[int] = set()
        unusable = False
        for count in counts:
            best: dict[tuple[str, str], tuple[Option, int]] = {}
            for _index, step in _count_steps(shapes, count, noted, absent is not None,
                                             larger_instances):
                if isinstance(step, str):
                    if absent is not None and step not in seen:
                        seen.add(step)
                        absent.append(step)
                    continue
                shape, instances, billed = step
                key = shape.sizing_key(count)
                if key not in sized:
                    try:
                        sized[key] = _once((*question, gpu, key), size_workload, SizingRequest(
                            gpu=gpu, count=count, **{**sizing, **shape.links(count)}))
                    except (InvalidInput, NotFound) as exc:
                        if getattr(exc, "usage", False):
                            raise  # a flag the user typed is wrong, not this offer
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
                spans = instances > 1
                for pick, (index, row) in shape.picks.items():
                    rule, source = rule_of(row.provider)
                    run = run_cost(row.price_per_gpu_hour, float(billed or count),
                                   float(result.wall_hours), rule)
                    held = best.get(pick)
                    # The cheapest run; between equal costs the earlier (cheaper) row.
                    if held is None or (run.cost, index) < (held[0].cost, held[1]):
                        best[pick] = (Option(gpu, count, row, instances, result, run, rule,
                                             source, shape.cluster if spans else None,
                                             shape.override if spans else None, billed),
                                      index)
            if unusable:
                break
            options.extend(option for option, _index in best.values())
    options.sort(key=lambda o: (o.cost, o.wall_hours, o.gpu, o.count, o.offer.provider,
                                o.offer.category, o.offer.region, o.offer.instance_type))
    return options, skipped


# Serving: ranked by cost per million output tokens at the service level ----------------------

@dataclass(frozen=True, slots=True)
class ServingOption:
    gpu: str
    count: int
    offer: PriceRow
    instances: int
    served: Any  # tracker.sizing.serving.ServingResult
    cost: Any  # tracker.economics.serving.ServingCost
    # GPUs the instances bill when the deployment uses part of one larger instance (2 of an
    # 8-GPU node; the rest can run more replicas of the same plan); None: all of them.
    billed_gpus: int | None = None

    @property
    def share_note(self) -> str | None:
        """'2 of the 8 GPUs of one p5en.48xlarge (the instance bills all 8; ...)'."""
        if self.billed_gpus is None:
            return None
        spare = self.billed_gpus // self.count - 1
        more = (f"; per-token figures hold when it runs {spare} more such "
                f"replica{'s' if spare != 1 else ''}") if spare >= 1 else ""
        return (f"{self.count} of the {self.billed_gpus} GPUs of one "
                f"{self.offer.instance_type} (the instance bills all {self.billed_gpus}{more})")

    @property
    def rank_key(self) -> tuple:
        """Cheapest per million output tokens (at the load, when one is given: what the
        month's bill buys), then the fewest GPUs."""
        from tracker.economics.serving import PER_TOKEN_PLACES

        cost = self.cost.cost_per_million_output_tokens_at_load
        if cost is None:
            cost = self.cost.cost_per_million_output_tokens
        return (cost.quantize(PER_TOKEN_PLACES), self.count, self.gpu,
                self.offer.provider, self.offer.category, self.offer.region,
                self.offer.instance_type)


@dataclass(frozen=True, slots=True)
class _First:
    """The first (cheapest) row of a provider, category, node and instance size, with its
    links: the offer's link inside the instance carries the TP all-reduces; only a replica
    whose pipeline stages span instances needs the cluster network."""

    row: PriceRow
    node: int
    cluster: str | None
    gbps: float | None
    domain: int | None


def _serving_firsts(rows: Sequence[PriceRow], wanted_node: int | None) -> list[_First]:
    """The first row per provider, category, node and instance size, in row order: at any
    count the first row of a provider, category and node that holds the count is one of
    these, and a (count, node) serves the same whatever the price, so the rest cannot win."""
    from tracker.core.fabric import effective_cluster, offer_scale_up_domain

    firsts: dict[tuple[str, str, int, float], _First] = {}
    for row in rows:
        node = node_size(row, wanted_node)
        key = (row.provider, row.category, node, float(row.gpu_count))
        if key not in firsts:
            cluster, gbps, _override = effective_cluster(row.provider, row.instance_type,
                                                         row.network)
            firsts[key] = _First(row, node, cluster, gbps,
                                 offer_scale_up_domain(row.provider, row.instance_type))
    return list(firsts.values())


def serving_options(
    rows: Sequence[PriceRow], sizing: Mapping[str, Any], spec: Any, *, max_gpus: int,
    hours_per_month: Decimal, gpu_counts: Iterable[int] | None = None,
    api_price_per_million_input: Decimal | None = None,
    api_price_per_million_output: Decimal | None = None, require_load: bool = True,
    cheapest_only: bool = False,
) -> tuple[list[ServingOption], list[str]]:
    """(options, skipped): every GPU, count, TP plan and offer that serves the workload at the
    service level (and carries the load, when one is given and `require_load`), cheapest per
    million output tokens first; one option per GPU, provider, category and instance size (the
    best GPU count of each: more replicas of the same plan cost the same per token).

    Each offer's instance is the node (TP stays inside it, or inside its NVLink domain where
    that spans instances: data/fabric.json `scale_up_domain`), as in `priced_options`. With
    explicit `gpu_counts`, an instance larger than the count also holds the deployment (2 x
    H200 inside an 8-GPU node, over its NVLink): the option says so in `billed_gpus`.
    Served once per count and node shape, priced once per provider, category and node;
    inside `shared_sizing`, the same question of the same rows is answered once.

    With `cheapest_only` (a load given), only the first option is sure to be the one it is
    without: an offer at a count whose hour's bill over the load's tokens
    (economics.serving.at_load_floor, what its cost per token at the load cannot be below)
    is above the cheapest option found so far is neither served nor priced, and `skipped`
    may miss what it would have said.
    """
    rows = tuple(rows)
    counts = None if gpu_counts is None else tuple(sorted(set(gpu_counts)))

    def answer() -> tuple[tuple[PriceRow, ...], list[ServingOption], list[str]]:
        return (rows, *_serving_options(
            rows, sizing, spec, max_gpus=max_gpus, hours_per_month=hours_per_month,
            gpu_counts=counts, api_price_per_million_input=api_price_per_million_input,
            api_price_per_million_output=api_price_per_million_output,
            require_load=require_load, cheapest_only=cheapest_only))

    memo = _SHARED.get()
    if memo is None:
        _rows, found, skipped = answer()
    else:
        key: tuple = ("served", repr(sorted(sizing.items())), repr(spec), max_gpus,
                      hours_per_month, counts, api_price_per_million_input,
                      api_price_per_million_output, require_load, _rows_key(rows))
        if cheapest_only and (*key, False) in memo:  # every option, asked before
            key = (*key, False)
        else:
            key = (*key, cheapest_only)
        _rows, found, skipped = _once(key, answer)
    return list(found), list(skipped)


def _serving_options(
    rows: Sequence[PriceRow], sizing: Mapping[str, Any], spec: Any, *, max_gpus: int,
    hours_per_month: Decimal, gpu_counts: Iterable[int] | None,
    api_price_per_million_input: Decimal | None, api_price_per_million_output: Decimal | None,
    require_load: bool, cheapest_only: bool = False,
) -> tuple[list[ServingOption], list[str]]:
    """serving_options, each time it is asked."""
    from tracker.economics.cost import tiling_offer
    from tracker.economics.serving import PER_TOKEN_PLACES, at_load_floor, serving_cost

    wanted_node = sizing.get("gpus_per_node")
    question = ("serve", repr(sorted(sizing.items())), repr(spec))
    options: list[ServingOption] = []
    skipped: list[str] = []
    # cheapest_only: the load (every served result of the question has the same) and the
    # lowest rank cost of the options so far, once an option with a load is found.
    load: float | None = None
    lowest: Decimal | None = None

    def above(price: Decimal, count: int) -> bool:
        """Whether `count` GPUs at `price` cannot rank first (cheapest_only): the floor of
        their cost per token at the load, quantized as rank_key's, is above the lowest."""
        return lowest is not None and load is not None and at_load_floor(
            price, count, load).quantize(PER_TOKEN_PLACES) > lowest

    for gpu, gpu_rows, counts in _per_gpu(rows, gpu_counts, max_gpus):
        # The floor grows with the price and the count: none of the GPU's offers, or none at
        # this count or more, when its cheapest offer at the count is above it.
        cheapest = min(row.price_per_gpu_hour for row in gpu_rows)
        if counts and above(cheapest, counts[0]):
            continue
        firsts = _serving_firsts(gpu_rows, wanted_node or _host(gpu))
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
            if above(cheapest, count):
                break
            priced: set[tuple[str, str, int]] = set()
            for first in firsts:
                row, node, cluster, gbps, domain = (first.row, first.node, first.cluster,
                                                    first.gbps, first.domain)
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
                held = best.get(kind)
                if held is not None and held.offer is row and held.served.meets_load:
                    # This offer carries the load on fewer GPUs already: on more it costs more
                    # a month for the same tokens (the cost at the load grows with the GPUs,
                    # and a tie goes to the fewer), so it is neither served nor priced here.
                    continue
                if above(row.price_per_gpu_hour, count):
                    # It cannot rank first: its cost at the load is at least the floor, above
                    # an option found (rank_key's cost, quantized alike, orders first).
                    continue
                links = (node, row.node_link, row.node_link_gbps, cluster, gbps, domain)
                key = (count, *links)
                if key not in served and links in hopeless:
                    served[key] = None
                if key not in served:
                    try:
                        served[key] = _serve_once(question, sizing, spec, gpu, count, row,
                                                  (node, gbps, domain, cluster is not None))
                    except (InvalidInput, NotFound) as exc:
                        if getattr(exc, "usage", False):
                            raise  # a flag the user typed is wrong, not this offer
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
                    replica_gpus=chosen.replica_gpus,
                    replica_output_tokens_per_s=result.point.output_tokens_per_s,
                    api_price_per_million_input=api_price_per_million_input,
                    api_price_per_million_output=api_price_per_million_output)
                option = ServingOption(gpu, count, row, tiled[1], result, cost, billed)
                if kind not in best or option.rank_key < best[kind].rank_key:
                    best[kind] = option
                if cheapest_only and result.load_output_tokens_per_s is not None:
                    load = result.load_output_tokens_per_s
                    ranked = option.rank_key[0]
                    lowest = ranked if lowest is None else min(lowest, ranked)
        options.extend(best.values())
    options.sort(key=lambda o: o.rank_key)
    return options, skipped


def _serve_once(question: tuple, sizing: Mapping[str, Any], spec: Any, gpu: str, count: int,
                row: PriceRow, links: tuple[int, float | None, int | None, bool]) -> Any:
    """serve() at `count` GPUs in instances like `row`'s with (node, cluster Gbps, scale-up
    domain, a cluster network or not): once per question inside `shared_sizing` (the engine
    sees whether there is a cluster network, not its name)."""
    from tracker.sizing import SizingRequest
    from tracker.sizing.serving import serve

    node, gbps, domain, clustered = links
    return _once((*question, gpu, count, row.node_link, row.node_link_gbps, *links), serve,
                 SizingRequest(gpu=gpu, count=count, **{
                     **sizing, "gpus_per_node": node, "node_link": row.node_link,
                     "node_link_gbps": row.node_link_gbps, "cluster_gbps": gbps,
                     "scale_up_domain": domain}), spec, cluster_network=clustered)


def _host(gpu: str) -> int:
    """GPUs in one host of the class when --gpus-per-node is not given: an instance larger
    than that (a rack of NVL72 trays sold as one) is several hosts (tracker.core.gpus)."""
    from tracker.core.gpus import DEFAULT_HOST_GPUS, gpu_table, host_gpus

    found = gpu_table().get(gpu)
    return host_gpus(found) if found is not None else DEFAULT_HOST_GPUS


def _rack_domain(gpu: str) -> int:
    """The GPU class's own scale-up domain where it spans hosts (72 on NVL72), else 1."""
    from tracker.core.gpus import gpu_table

    found = gpu_table().get(gpu)
    domain = (found.specs.scale_up_domain or 1) if found and found.specs else 1
    return domain if domain > 8 else 1


def _absent_line(row: PriceRow) -> str:
    """'vastai 1x-B200: independent hosts, no cluster network'."""
    return f"{row.provider} {row.instance_type}: {row.network_note or 'no cluster network known'}"


def group_absent(absent: Sequence[str]) -> list[str]:
    """The `absent` lines with one line per provider and reason, listing the instance types:
    'vastai 1x-B200, 1x-H100_SXM: independent hosts, no cluster network'."""
    groups: dict[tuple[str, str], list[str]] = {}
    for line in absent:
        provider, rest = line.split(" ", 1)
        instance, note = rest.split(": ", 1)
        groups.setdefault((provider, note), []).append(instance)
    return [f"{provider} {', '.join(instances)}: {note}"
            for (provider, note), instances in groups.items()]
