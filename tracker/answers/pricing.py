"""Prices for the economics answers, looked up in the store as of an instant.

The economics engine receives prices; this module finds them: the cheapest stored offer
whose instances make up a GPU count (optionally sized per offer), one instance type's price,
a Spot Advisor band as an MTTI, and the ranked runs of `compare`. When nothing matches, the
NotFound says in one line what was asked for and what the store has instead.

Imports the store (SQLAlchemy): import this module only when a price must be looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.breakeven_documents import comparable_offer
from tracker.answers.candidates import by_instance, priced_options
from tracker.answers.documents import (
    as_of_text,
    check_fits,
    compare_rows,
    size_run,
    whole_count,
)
from tracker.answers.offers import (
    describe_comparator,
    describe_offer,
    joinable,
    plan_shaped_offer,
)
from tracker.core.errors import InvalidInput, NotFound, usage_error
from tracker.store.queries import (
    PriceRow,
    interruption_facts,
    price_rows,
    price_rows_per_shape,
)

if TYPE_CHECKING:
    from tracker.answers.documents import SpotDocument
    from tracker.core.fabric import Override
    from tracker.economics.cost import BillingRule
    from tracker.economics.defaults import EconomicsSettings
    from tracker.economics.spot import SpotInputs
    from tracker.sizing import SizingResult
    from tracker.store.db import Database

Billing = Callable[[str], "tuple[BillingRule, str]"]
# A --provider or --region filter: one name, several (any of them), or None (all).
Names = str | Sequence[str] | None


def _shown(names: Names) -> str:
    return names if isinstance(names, str) else " or ".join(names or ())


def _priced(db: Database, currency: str, *, as_of: datetime | None,
            settings: EconomicsSettings | None = None,
            owned_utilization: Decimal | None = None,
            per_shape: Collection[str] | None = None, named_unclustered: bool = True,
            **filters: Any) -> list[PriceRow]:
    """Stored prices in `currency`: offers quoted in another currency converted at the ECB
    rate of their observation day (tracker.core.fx), never compared unconverted. With
    `settings`, hardware quotes are first priced as owned cost per GPU-hour in their own
    currency (`tracker.economics.owned`). With `per_shape` (`candidates.by_instance`), only
    the rows a question sized once per shape can pick or name
    (`store.queries.price_rows_per_shape`; `named_unclustered` when it names the instances no
    cluster network joins): what `candidates.priced_options` and `serving_options` answer
    from them is what they answer from every row."""
    from tracker.store.rates import priced_in

    if per_shape is None:
        rows = price_rows(db, as_of=as_of, **filters)
    else:
        rows = price_rows_per_shape(db, currency=currency, as_of=as_of, by_instance=per_shape,
                                    named_unclustered=named_unclustered, **filters)
    if settings is not None and any(r.category == "quote" for r in rows):
        from tracker.economics.owned import price_quotes
        from tracker.store.rates import rate_table

        rows = price_quotes(rows, settings, owned_utilization, rates=lambda: rate_table(db))
    return priced_in(db, rows, currency, as_of)


def describe_gpu_prices(rows: Sequence[PriceRow], limit: int = 8) -> str:
    """'aws on-demand (8 GPUs); lambda on-demand (1, 8 GPUs)': what a GPU's rows offer."""
    groups: dict[tuple[str, str], set[float]] = {}
    for row in rows:
        groups.setdefault((row.provider, row.category), set()).add(float(row.gpu_count))
    parts = []
    for (provider, category), counts in sorted(groups.items())[:limit]:
        sizes = ", ".join(f"{c:g}" for c in sorted(counts))
        parts.append(f"{provider} {category} ({sizes} GPUs)")
    more = f" and {len(groups) - limit} more" if len(groups) > limit else ""
    return "; ".join(parts) + more


def no_price(
    db: Database, *, as_of: datetime | None, gpu: str, count: float, provider: Names,
    region: Names, category: str | None, currency: str,
) -> NotFound:
    """One line: what was asked for, and what the store does have instead."""
    wanted = " ".join(x for x in (category or "any-category", "price for",
                                  f"{count:g}x {gpu}") if x)
    if provider:
        wanted += f" from {_shown(provider)}"
    if region:
        wanted += f" in {_shown(region)}"
    wanted += f" as of {as_of_text(as_of)}"
    same_gpu = _priced(db, currency, as_of=as_of, gpu=gpu)
    if same_gpu:
        return NotFound(f"no {wanted}; {gpu} prices exist for: {describe_gpu_prices(same_gpu)}")
    others = sorted({r.gpu for r in _priced(db, currency, as_of=as_of)})
    if others:
        shown = ", ".join(others[:12]) + (" ..." if len(others) > 12 else "")
        return NotFound(f"no {wanted}; GPUs with {currency} prices: {shown}")
    return NotFound(f"no {wanted}; the store has no {currency} prices then "
                    "(run `gpu-tracker refresh`)")


def priced_offer(
    db: Database, *, gpu: str, count: float, as_of: datetime | None, provider: Names,
    region: Names, category: str | None, currency: str,
    settings: EconomicsSettings | None = None,
    overrides: Mapping[str, Override] | None = None, allow_unclustered: bool = False,
) -> tuple[PriceRow, int]:
    """The stored offer it is cheapest to hold `count` GPUs on for one job: (row, instances).
    One instance with at least `count` GPUs, or whole instances a cluster network joins
    (`offers.plan_shaped_offer`), ranked by what the instances bill an hour."""
    rows = _priced(db, currency, as_of=as_of, settings=settings, gpu=gpu, provider=provider,
                   region=region, category=category)
    chosen = plan_shaped_offer(rows, count, overrides=overrides,
                               allow_unclustered=allow_unclustered)
    if chosen is None:
        raise no_price(db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                       region=region, category=category, currency=currency)
    return chosen[0], chosen[1]


def cheapest_sized_offer(
    db: Database, *, gpu: str, count: float, workload: Mapping[str, Any], billing: Billing,
    as_of: datetime | None, provider: Names, region: Names, category: str | None,
    currency: str, settings: EconomicsSettings | None = None,
    overrides: Mapping[str, Override] | None = None, allow_unclustered: bool = False,
) -> tuple[PriceRow, int, SizingResult]:
    """The stored offer with the cheapest run on `count` GPUs: (row, instances, sizing).

    The offer decides the node: eight 1-GPU instances talk over the network, one 8-GPU
    instance over NVLink, so each instance size is sized and priced apart. One instance with
    more GPUs than `count` runs it too, at what the whole instance bills (2 GPUs of an 8-GPU
    node: `documents.cost_document` says so).
    """
    rows = _priced(db, currency, as_of=as_of, settings=settings,
                   per_shape=by_instance(overrides), gpu=gpu, provider=provider, region=region,
                   category=category)
    fields = {k: v for k, v in workload.items() if v is not None}
    absent: list[str] = []
    options, skipped = priced_options(rows, fields, billing=billing, max_gpus=int(count),
                                      gpu_counts=[whole_count(count)], overrides=overrides,
                                      allow_unclustered=allow_unclustered, absent=absent,
                                      larger_instances=True)
    if options:
        best = options[0]
        if best.override:
            # The sizing is shared between offers (memoised): say it on a copy.
            from dataclasses import replace

            return best.offer, best.instances, replace(
                best.sized, warnings=(*best.sized.warnings, best.override))
        return best.offer, best.instances, best.sized
    if skipped:
        raise InvalidInput(f"cannot size this job: {skipped[0]}")
    if absent and not any(float(r.gpu_count) >= count for r in rows):
        raise InvalidInput(f"no offer can join {count:g} x {gpu} into one job: {absent[0]} "
                           "(override with --allow-unclustered or [fabric.overrides])")
    if rows:  # offers exist, but the job fits none of their node shapes
        check_fits(size_run(gpu, count, workload), count, gpu)
    raise no_price(db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                   region=region, category=category, currency=currency)


def offer_for_run(
    db: Database, *, gpu: str, count: float, workload: Mapping[str, Any] | None,
    billing: Billing, as_of: datetime | None, provider: Names, region: Names,
    category: str | None, currency: str, settings: EconomicsSettings | None = None,
    overrides: Mapping[str, Override] | None = None, allow_unclustered: bool = False,
) -> tuple[PriceRow, int, SizingResult | None]:
    """(row, instances, sizing) for a run on `count` GPUs: with a `workload`, the offer with
    the cheapest sized run (joining instances only over a cluster network unless overridden);
    without one (the run time is known), the cheapest that tiles."""
    filters: dict[str, Any] = {"as_of": as_of, "provider": provider, "region": region,
                               "category": category, "currency": currency,
                               "settings": settings}
    if workload is None:
        return (*priced_offer(db, gpu=gpu, count=count, overrides=overrides,
                              allow_unclustered=allow_unclustered, **filters), None)
    return cheapest_sized_offer(db, gpu=gpu, count=count, workload=workload, billing=billing,
                                overrides=overrides, allow_unclustered=allow_unclustered,
                                **filters)


def cloud_price(
    db: Database, *, gpu: str | None, gpus: Decimal, as_of: datetime | None,
    provider: Names, region: Names, category: str | None, currency: str,
    offer_id: int | None = None,
) -> tuple[Decimal, PriceRow, str]:
    """(price per hour for `gpus` GPUs together, its offer, the comparator named in words).

    The comparator is the cheapest comparable offer: the same GPUs in one node (see
    `breakeven_documents.comparable_offer`), in `category` (on-demand by default), or the stored
    offer `offer_id` when one is chosen.
    """
    if offer_id is not None:
        rows = [r for r in _priced(db, currency, as_of=as_of) if r.offer_id == offer_id]
        if not rows:
            raise NotFound(f"no {currency} price for offer {offer_id} as of "
                           f"{as_of_text(as_of)} (see `gpu-tracker prices`)")
        row = rows[0]
        return row.price_per_gpu_hour * gpus, row, describe_offer(row) + ", chosen with --offer"
    if gpu is None:
        raise InvalidInput("give --gpu to price from the store, or --offer")
    rows = _priced(db, currency, as_of=as_of, gpu=gpu, provider=provider, region=region,
                   category=category)
    chosen = comparable_offer(rows, float(gpus))
    if chosen is None:
        found = no_price(db, as_of=as_of, gpu=gpu, count=float(gpus), provider=provider,
                         region=region, category=category, currency=currency)
        raise NotFound(f"{found} -- no offer holds these GPUs in one node, or in nodes "
                       "a cluster network joins; pass --offer ID or --cloud-price-per-hour")
    row, instances = chosen
    return row.price_per_gpu_hour * gpus, row, describe_offer(row, instances)


def instance_price(
    db: Database, *, provider: str, region: str | None, instance: str, category: str,
    as_of: datetime | None, currency: str,
) -> PriceRow:
    """The cheapest stored price of one instance type (across zones) in a category."""
    rows = [r for r in _priced(db, currency, as_of=as_of, provider=provider, region=region,
                               category=category)
            if r.instance_type == instance]
    if rows:
        return rows[0]
    listed = _priced(db, currency, as_of=as_of, provider=provider, region=region)
    same = sorted({r.category for r in listed if r.instance_type == instance})
    where = f"{provider} {region}" if region else provider
    when = as_of_text(as_of)
    if same:
        raise NotFound(f"no {category} price for {instance} in {where} as of {when}; "
                       f"it has: {', '.join(same)}")
    types = sorted({r.instance_type for r in listed if r.category == category})
    if types:
        shown = ", ".join(types[:10]) + (" ..." if len(types) > 10 else "")
        raise NotFound(f"no {category} price for {instance} in {where} as of {when}; "
                       f"{category} prices exist for: {shown}")
    raise NotFound(f"no {category} prices from {where} as of {when} "
                   "(run `gpu-tracker refresh`)")


def interruption_bands(db: Database, as_of: datetime | None, *, provider: str | None = None,
                       region: str | None = None, instance_type: str | None = None
                       ) -> dict[tuple[str, str, str], Any]:
    """The stored interruption band per (provider, region, instance type) in force at
    `as_of`: the Linux one where there are several (Spot Advisor lists each OS), else the
    first. The bands every spot plan reads (`documents.node_mtti`)."""
    bands: dict[tuple[str, str, str], Any] = {}
    for fact in interruption_facts(db, provider=provider, region=region,
                                   instance_type=instance_type, as_of=as_of):
        key = (fact.provider, fact.region, fact.instance_type)
        if key not in bands or (fact.os.lower() == "linux"
                                and bands[key].os.lower() != "linux"):
            bands[key] = fact
    return bands


def instance_provider(db: Database, instance: str, region: str | None,
                      as_of: datetime | None) -> str:
    """The provider an instance type given without --provider belongs to: the one whose own
    instance families (data/fabric.json) name it, else the one whose stored offers list it;
    a usage error naming them when there are several or none."""
    from tracker.core.fabric import instance_providers

    found = instance_providers(instance)
    if not found:
        found = sorted({r.provider for r in price_rows(db, as_of=as_of, region=region)
                        if r.instance_type == instance})
    if len(found) == 1:
        return found[0]
    where = f" in {region}" if region else ""
    if found:
        raise usage_error(f"--instance {instance} is offered by {', '.join(found)}{where}: "
                          "give --provider")
    raise usage_error(f"--instance {instance}: no stored offer{where} or known instance "
                      "family names it; give --provider")


def spot_for_plan(
    db: Database, settings: EconomicsSettings, base: SpotInputs, *, gpu: str, count: int,
    mtti_hours: float | None, as_of: datetime | None, provider: Names,
    region: Names, currency: str, on_demand_price_per_gpu_hour: Decimal | None = None,
    notice_window: bool = False, notice_seconds: float | None = None,
) -> SpotDocument:
    """The best spot plan for `count` x `gpu`: every stored spot or bid offer whose instances
    can make up the plan (`documents.spot_candidates`; a larger instance counts whole), each
    with its own MTTI (given, else its interruption band, else the provider default) and
    notice window, against on-demand at the given or the cheapest stored price per GPU-hour.
    The work hours are the plan's; a larger instance is assumed no faster (conservative)."""
    from dataclasses import replace

    from tracker.answers.documents import node_mtti, spot_candidates, spot_document, spot_rank

    rows = _priced(db, currency, as_of=as_of, gpu=gpu, provider=provider, region=region,
                   category=["spot", "bid"])
    # Only shapes that can run the job: one instance, or instances a cluster network joins.
    candidates = [c for c in spot_candidates(rows, count) if joinable(c[0], c[2])]
    if not candidates:
        if spot_candidates(rows, count):
            raise NotFound(f"no spot or bid offer can run {count} x {gpu} as one job: the "
                           "offers' instances have no cluster network to join them")
        raise no_price(db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                       region=region, category="spot", currency=currency)
    od_offer, od_bill = None, None
    comparator = "given on-demand price per GPU-hour"
    if on_demand_price_per_gpu_hour is None:
        # The same shape as the plan: never a saving against pods that cannot run the job.
        od_rows = _priced(db, currency, as_of=as_of, gpu=gpu, category="on-demand")
        shaped = plan_shaped_offer(od_rows, count)
        if shaped is None:
            raise NotFound(f"no on-demand offer holds {count} x {gpu} in one instance or a "
                           f"cluster to compare spot with as of {as_of_text(as_of)}; pass "
                           "--on-demand-price")
        od_offer, od_instances, _per_gpu = shaped
        # What holding the plan on-demand bills an hour, whatever the instance sizes.
        od_bill = od_offer.price_per_hour * od_instances
        comparator = describe_comparator(od_offer, od_instances, count)
    bands = interruption_bands(db, as_of) if mtti_hours is None else {}
    best = None
    for row, gpus, instances in candidates:
        mtti, source = node_mtti(settings, bands, provider=row.provider, region=row.region,
                                 instance_type=row.instance_type, given=mtti_hours)
        notice = None
        if notice_window:  # the given window, else this offer's provider's own
            seconds = notice_seconds if notice_seconds is not None else \
                settings.notice_seconds(row.provider)
            notice = None if seconds is None else seconds / 3600.0
        inputs = replace(
            base, mtti_node_hours=mtti, nodes=instances, notice_window_hours=notice,
            spot_price_per_node_hour=row.price_per_hour,
            on_demand_price_per_node_hour=od_bill / instances if od_bill is not None
            else Decimal(on_demand_price_per_gpu_hour or 0)
            * Decimal(repr(float(row.gpu_count))))
        try:
            doc = spot_document(inputs, mtti_source=source, currency=currency, spot_offer=row,
                                on_demand_offer=od_offer)
        except InvalidInput:
            continue
        if best is None or spot_rank(doc.plan, row) < spot_rank(best[0].plan, best[1]):
            best = (doc, row, gpus)
    if best is None:
        raise InvalidInput(f"no spot plan could be made for {count} x {gpu} "
                           "(see `gpu-tracker spot --help`)")
    doc, _row, gpus = best
    doc.data.update({"gpu": gpu, "plan_gpus": count, "gpus": gpus,
                     "offers_considered": len(candidates),
                     "on_demand_comparator": comparator})
    return doc


def no_compare_prices(db: Database, *, as_of: datetime | None, gpus: Sequence[str] | None,
                      currency: str) -> NotFound:
    """No stored price matches the compare filters: which GPUs do have prices then."""
    others = sorted({r.gpu for r in _priced(db, currency, as_of=as_of)})
    asked = f" for {', '.join(gpus)}" if gpus else ""
    when = as_of_text(as_of)
    if others:
        return NotFound(f"no {currency} prices match{asked} as of {when}; GPUs with "
                        f"prices: {', '.join(others)}")
    return NotFound(f"the store has no {currency} prices as of {when} "
                    "(run `gpu-tracker refresh`)")


def compare_runs(
    db: Database, *, workload: Mapping[str, Any], billing: Billing, max_gpus: int,
    as_of: datetime | None, currency: str, gpus: Sequence[str] | None = None,
    providers: Sequence[str] | None = None, regions: Sequence[str] | None = None,
    categories: Sequence[str] | None = None, limit: int | None = None,
    settings: EconomicsSettings | None = None, owned_utilization: Decimal | None = None,
    overrides: Mapping[str, Override] | None = None, allow_unclustered: bool = False,
    absent: list[str] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, skipped): every stored GPU model and count that fits the workload, priced per
    run and ranked cheapest first (see `tracker.answers.candidates.priced_options`); `skipped` says
    which GPUs could not be sized, `absent` (when given) why larger counts of an offer are
    missing (no cluster network). Empty filters mean all. Hardware quotes are priced as
    owned cost per used GPU-hour (`tracker.economics.owned`) with `settings`, and left out
    without them."""
    rows = _priced(db, currency, as_of=as_of, settings=settings,
                   owned_utilization=owned_utilization, per_shape=by_instance(overrides),
                   named_unclustered=absent is not None or allow_unclustered,
                   gpu=gpus or None, provider=providers or None, region=regions or None,
                   category=categories or None)
    if settings is None:
        rows = [r for r in rows if r.category != "quote"]
    if not rows:
        raise no_compare_prices(db, as_of=as_of, gpus=gpus or None, currency=currency)
    fields = {k: v for k, v in workload.items() if v is not None}
    options, skipped = priced_options(rows, fields, billing=billing, max_gpus=max_gpus,
                                      overrides=overrides, allow_unclustered=allow_unclustered,
                                      absent=absent)
    ranked = compare_rows(options, skipped=skipped, priced_gpus=[r.gpu for r in rows],
                          max_gpus=max_gpus, as_of=as_of, limit=limit)
    return ranked, skipped


def serving_deployments(
    db: Database, *, workload: Mapping[str, Any], spec: Any, settings: EconomicsSettings,
    max_gpus: int, as_of: datetime | None, currency: str, gpus: Sequence[str] | None = None,
    providers: Sequence[str] | None = None, regions: Sequence[str] | None = None,
    categories: Sequence[str] | None = None, gpu_counts: Sequence[int] | None = None,
    api_price_per_million_input: Decimal | None = None,
    api_price_per_million_output: Decimal | None = None, require_load: bool = True,
    owned_utilization: Decimal | None = None,
) -> tuple[list[Any], list[str], list[PriceRow]]:
    """(options, skipped, rows): the stored offers that serve the workload at its service level,
    cheapest per million output tokens first (`candidates.serving_options`); hardware
    quotes at their owned cost per GPU-hour, as `compare_runs` prices them."""
    from tracker.answers.candidates import serving_options

    rows = _priced(db, currency, as_of=as_of, settings=settings,
                   owned_utilization=owned_utilization, per_shape=by_instance(),
                   named_unclustered=False, gpu=gpus or None, provider=providers or None,
                   region=regions or None, category=categories or None)
    if not rows:
        raise no_compare_prices(db, as_of=as_of, gpus=gpus or None, currency=currency)
    options, skipped = serving_options(
        rows, workload, spec, max_gpus=max_gpus, gpu_counts=gpu_counts,
        hours_per_month=settings.value("hours_per_month"),
        api_price_per_million_input=api_price_per_million_input,
        api_price_per_million_output=api_price_per_million_output, require_load=require_load)
    return options, skipped, rows
