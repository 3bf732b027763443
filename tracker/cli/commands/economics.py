"""Economics commands: cost and compare (the click layer; spot and breakeven have their own
modules).

Each command parses its flags, looks prices up in the store only when they are not given
(`tracker.answers.pricing`), builds its answer with `tracker.answers.documents` and prints it with
the shared formatter; the human tables are drawn here. The store and the sizing engine are
imported only when a command needs them, so `breakeven` and `spot` with given prices start
without SQLAlchemy, pandas or numpy.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import click

from tracker.answers.documents import (
    cost_document,
)
from tracker.answers.serving_documents import (
    SERVING_COMPARE_COLUMNS,
    serving_compare_rows,
    serving_cost_document,
)
from tracker.answers.workloads import has_model, wants_serving, workload_request
from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import (
    as_of_option,
    category_option,
    economics_currency_options,
    one_provider,
    provider_option,
    region_option,
)
from tracker.cli.commands.params import (
    COUNT,
    DECIMAL_FRACTION,
    GPU_COUNT,
    MONEY,
    NON_NEGATIVE_COUNT,
    OPEN_DECIMAL_FRACTION,
    POSITIVE_HOURS,
    ROW_LIMIT,
    WHOLE_GPUS,
    BoundedDecimal,
    resolve_gpus,
)
from tracker.cli.commands.printing import emit, field_lines, format_option, money_text
from tracker.cli.commands.workload import GPU_OPTION, workload_options
from tracker.core.errors import InvalidInput
from tracker.economics import defaults as econ_defaults
from tracker.economics.units import positive

__all__ = ["compare", "cost"]

# Unbounded shapes (the bounded ones live in tracker.cli.commands.params, with the checks).
DECIMAL = BoundedDecimal()


ALLOW_UNCLUSTERED_HELP = ("Let a job span instances that have no cluster network (joined "
                          "over 10 Gb/s TCP, an assumption); shown in the output.")


def _note_single_instance(app: AppContext, groups: list[str]) -> None:
    """One line naming the providers whose instance sizes join no cluster (why, one a line
    with -v): like the skipped GPUs, a page of reasons before the table buries the answer."""
    if not groups:
        return
    if app.verbosity:
        for note_text in groups:
            app.note(f"no multi-instance options (plans stay within one instance) for "
                     f"{note_text}")
        return
    providers = list(dict.fromkeys(text.split(" ", 1)[0] for text in groups))
    app.note(f"no multi-instance options (plans stay within one instance) for some instance "
             f"sizes of {', '.join(providers)}: no cluster network joins them; -v lists why")


def _note_skipped(app: AppContext, skipped: list[str]) -> None:
    """One line naming the GPUs left out (the reasons one a line with -v): fifteen reasons
    before the table bury the answer."""
    if not skipped:
        return
    if app.verbosity:
        for note_text in skipped:
            app.note(f"skipped {note_text}")
        return
    gpus = list(dict.fromkeys(line.split(" ", 1)[0].rstrip(":") for line in skipped))
    shown = ", ".join(gpus[:8]) + (f" and {len(gpus) - 8} more" if len(gpus) > 8 else "")
    app.note(f"skipped {len(skipped)} GPU/instance size(s) that cannot run this workload "
             f"({shown}); -v lists why")


def _fabric_overrides(app: AppContext) -> dict[str, Any]:
    """`[fabric.overrides]` from the configuration (tracker.core.fabric.parse_overrides)."""
    from tracker.core.fabric import parse_overrides

    return parse_overrides(app.config.fabric.model_dump())


# cost -----------------------------------------------------------------------------------------

API_OPTIONS = [
    click.option("--api-price-per-million-input", type=DECIMAL,
                 help="Serving: an API's price per million input tokens, for the breakeven."),
    click.option("--api-price-per-million-output", type=DECIMAL,
                 help="Serving: an API's price per million output tokens, for the breakeven."),
]


def _api_options(func: Any) -> Any:
    for option in reversed(API_OPTIONS):
        func = option(func)
    return func


@click.command()
@workload_options
@_api_options
@click.option("--hours", type=POSITIVE_HOURS,
              help="Wall hours of one run on --count GPUs (skips sizing).")
@GPU_OPTION
@click.option("--count", "-n", type=GPU_COUNT, default=1.0, show_default=True,
              help="GPUs in the run.")
@click.option("--price-per-gpu-hour", type=MONEY, help="Given price (else the store's).")
@provider_option(" (the store price; with a given price, the one whose billing applies)")
@region_option(" (the store price)")
@category_option(many=False, default="on-demand", purpose=" (the store price)")
@as_of_option("The store price and the exchange rates valid")
@economics_currency_options("--price-per-gpu-hour, --api-price-per-million-*")
@click.option("--billing-seconds", type=COUNT,
              help="Billing granularity in seconds (default: per provider, else 1).")
@click.option("--billing-minimum-seconds", type=NON_NEGATIVE_COUNT,
              help="Minimum billed seconds per run.")
@click.option("--success-rate", type=OPEN_DECIMAL_FRACTION,
              help="Probability p that one attempt succeeds.")
@click.option("--fail-fraction", type=DECIMAL_FRACTION,
              help="Share of a run a failed attempt uses before it is caught (default 1).")
@click.option("--experiments", type=COUNT, help="K experiments, for time to result.")
@click.option("--parallel", type=COUNT, default=1, show_default=True,
              help="P parallel slots, for time to result.")
@click.option("--slot-utilization", type=OPEN_DECIMAL_FRACTION,
              help="Share of the day a slot runs back to back (default 1), for runs per day.")
@click.option("--allow-unclustered", is_flag=True, help=ALLOW_UNCLUSTERED_HELP)
@format_option
@pass_app
def cost(app: AppContext, hours: float | None, gpu: str | None, count: float,
         price_per_gpu_hour: Decimal | None, providers: tuple[str, ...],
         regions: tuple[str, ...], category: str, as_of: datetime | None,
         currency: str | None, price_currency: str | None,
         billing_seconds: int | None, billing_minimum_seconds: int | None,
         success_rate: Decimal | None, fail_fraction: Decimal | None, experiments: int | None,
         parallel: int, slot_utilization: Decimal | None, allow_unclustered: bool, fmt: str,
         api_price_per_million_input: Decimal | None,
         api_price_per_million_output: Decimal | None, **options: Any) -> None:
    """Cost of one run (and per successful experiment) on N GPUs.

    Wall time comes from the sizing engine (--model/--params, --tokens, --gpu, --count) or
    from --hours. The price is --price-per-gpu-hour, or the cheapest stored offer for the GPU
    and count as of --as-of (filter with --provider, --region, --category).

    With --workload inference (the default) and no --hours: cost per million tokens, per
    request and (with a load) per month at the service level, and with API prices the
    breakeven volume against the API.
    """
    from tracker.cli.commands.currencies import economics_currencies

    workload, spec = workload_request(options)
    money = economics_currencies(
        app, currency, price_currency, as_of=as_of, given={
            "--price-per-gpu-hour": price_per_gpu_hour,
            "--api-price-per-million-input": api_price_per_million_input,
            "--api-price-per-million-output": api_price_per_million_output})
    settings, currency = money.settings, money.display
    price_per_gpu_hour = money.given(price_per_gpu_hour)
    api_price_per_million_input = money.given(api_price_per_million_input)
    api_price_per_million_output = money.given(api_price_per_million_output)
    # A given price is billed by one provider's rule; a store price may be any of theirs'.
    billed_by = (one_provider(providers, "for the billing rule of --price-per-gpu-hour")
                 if price_per_gpu_hour is not None else None)
    provider = list(providers) or None
    region = list(regions) or None
    positive(count, "--count")
    if hours is not None:
        positive(hours, "--hours")
    gpu_id = resolve_gpus([gpu], app)[0] if gpu else None
    if price_per_gpu_hour is None:
        from tracker.store.known import check_filters

        check_filters(app.db, providers, regions)  # a store price: they must be in the store
    if hours is None and wants_serving(workload):
        _cost_serving(app, settings, workload, spec, gpu_id=gpu_id, count=count,
                      price=price_per_gpu_hour, provider=provider, billed_by=billed_by,
                      region=region,
                      category=category, as_of=as_of, currency=currency, fmt=fmt,
                      api_in=api_price_per_million_input, api_out=api_price_per_million_output,
                      notes=money.notes)
        return
    if api_price_per_million_input is not None or api_price_per_million_output is not None:
        raise InvalidInput("--api-price-per-million-* compare serving costs; use --workload "
                           "inference without --hours")
    if hours is None and (gpu_id is None or not has_model(workload)
                          or workload.get("tokens") is None):
        raise InvalidInput(
            "give --hours, or --model (or --params), --tokens and --gpu for the sizing "
            "engine to estimate the run time")
    if hours is None:
        positive(workload["tokens"], "--tokens")
    offer = instances = sized = None
    if price_per_gpu_hour is None:
        if gpu_id is None:
            raise InvalidInput("give --price-per-gpu-hour, or --gpu to price from the store")
        from tracker.answers import pricing

        offer, instances, sized = pricing.offer_for_run(
            app.db, gpu=gpu_id, count=count, workload=workload if hours is None else None,
            billing=settings.billing, as_of=as_of, provider=provider, region=region,
            category=category, currency=currency, settings=settings,
            overrides=_fabric_overrides(app), allow_unclustered=allow_unclustered)
    answer = cost_document(
        settings, gpu=gpu_id, count=count, currency=currency, hours=hours, workload=workload,
        price=price_per_gpu_hour, offer=offer, instances=instances, sized=sized,
        provider=billed_by, billing_seconds=billing_seconds,
        billing_minimum_seconds=billing_minimum_seconds, success_rate=success_rate,
        fail_fraction=fail_fraction, experiments=experiments, parallel=parallel,
        slot_utilization=slot_utilization)
    answer.data["warnings"].extend(money.notes)
    emit(answer.data, fmt, table_text=_cost_table(answer.data, experiments, parallel))


def _cost_serving(app: AppContext, settings: econ_defaults.EconomicsSettings,
                  workload: dict[str, Any], spec: Any, *, gpu_id: str | None, count: float,
                  price: Decimal | None, provider: list[str] | None, billed_by: str | None,
                  region: list[str] | None, category: str, as_of: datetime | None,
                  currency: str, fmt: str, api_in: Decimal | None, api_out: Decimal | None,
                  notes: list[str]) -> None:
    """`cost -w inference`: one deployment of --count GPUs priced per token."""
    from tracker.answers.documents import whole_count
    from tracker.sizing import SizingRequest, size_workload
    from tracker.sizing.serving import serve

    if gpu_id is None or not has_model(workload):
        raise InvalidInput("give --hours, or --model (or --params) and --gpu for the sizing "
                           "engine to price serving per token (or -w pretrain etc. with "
                           "--tokens for a training run)")
    gpus = whole_count(count)
    tokens = workload.get("tokens")
    if tokens is not None:
        positive(tokens, "--tokens")
    fields = {k: v for k, v in workload.items() if k != "tokens"}
    offer = instances = best = None
    if price is None:
        from tracker.answers import pricing
        from tracker.answers.candidates import offer_node

        found, skipped, _rows = pricing.serving_deployments(
            app.db, workload=fields, spec=spec, settings=settings, max_gpus=gpus,
            as_of=as_of, currency=currency, gpus=[gpu_id],
            providers=provider, regions=region,
            categories=[category] if category else None, gpu_counts=[gpus],
            require_load=False)
        if not found:
            if skipped:
                raise InvalidInput(f"cannot serve this workload: {skipped[0]}")
            raise pricing.no_price(app.db, as_of=as_of, gpu=gpu_id, count=count,
                                   provider=provider, region=region, category=category,
                                   currency=currency)
        best = found[0]
        served, offer, instances = best.served, best.offer, best.instances
        request = SizingRequest(gpu=gpu_id, count=gpus, **{
            **fields, "gpus_per_node": offer_node(best.offer, fields.get("gpus_per_node"))})
    else:
        request = SizingRequest(gpu=gpu_id, count=gpus, **fields)
        served = serve(request, spec)
    sized = size_workload(request) if price is not None else None
    data = serving_cost_document(
        settings, served=served, price=price, count=gpus, currency=currency, offer=offer,
        instances=instances, provider=billed_by, tokens=tokens,
        share=best, sizing_warnings=tuple(sized.warnings) if sized else (),
        api_price_per_million_input=api_in, api_price_per_million_output=api_out)
    data["warnings"].extend(notes)
    emit(data, fmt, table_text=_serving_cost_table(data) if fmt == "table" else None)


def _serving_cost_table(data: dict[str, Any]) -> str:
    """The human table, drawn from the JSON document alone (the same figures, rounded)."""
    from tracker.cli.commands.size import render_serving_lines

    currency = data["currency"]
    pairs = [
        ("GPU", f"{data['count']} x {data['gpu']}"),
        ("price", f"{money_text(data['price_per_gpu_hour'], currency, rate=True)} per "
                  "GPU-hour"),
        ("per million output tokens", money_text(data["cost_per_million_output_tokens"],
                                                  currency, rate=True)),
        ("per million tokens (in+out)", money_text(data["cost_per_million_tokens"], currency,
                                                    rate=True)),
        ("per request", money_text(data["cost_per_request"], currency, places=6)),
    ]
    if data["cost_per_month"] is not None:
        pairs.append(("per month at the load", money_text(data["cost_per_month"], currency)))
        pairs.append(("per million output at the load", money_text(
            data["cost_per_million_output_tokens_at_load"], currency, rate=True)))
    if data.get("cost") is not None:
        pairs.append(("cost of --tokens", f"{money_text(data['cost'], currency)} over "
                                          f"{data['wall_hours']:,.4g} h"))
    if "api_cost_per_million_output_tokens" in data:
        pairs.append(("API per million output", money_text(
            data["api_cost_per_million_output_tokens"], currency, rate=True)))
        breakeven = data["breakeven_output_tokens_per_day"]
        pairs.append(("cheaper than the API above", "never (the API is cheaper per token)"
                      if breakeven is None else f"{breakeven:,} output tokens/day"))
        if data.get("monthly_saving_vs_api") is not None:
            pairs.append(("saving vs API per month", money_text(data["monthly_saving_vs_api"],
                                                                 currency)))
    offer = data.get("offer")
    if offer:
        pairs.append(("offer", f"{offer['provider']} {offer['instance_type']} "
                               f"{offer['region']} {offer['category']} x{data['instances']}"
                               + (f": {data['instance_share']}" if data.get("instance_share")
                                  else "")))
        pairs.extend(_fx_lines(offer))
    text = field_lines(pairs)
    lines = [text, "", *render_serving_lines(data["serving"])]
    lines.extend(f"warning: {w}" for w in data["warnings"]
                 if w not in data["serving"].get("warnings", ()))
    return "\n".join(lines)


def _cost_table(data: dict[str, Any], experiments: int | None, parallel: int) -> str:
    """The human table, drawn from the JSON document alone (the same figures, rounded)."""
    currency = data["currency"]
    pairs = [
        ("GPU", f"{data['count']:g} x {data['gpu'] or '(given price)'}"),
        ("wall time", f"{data['wall_hours']:,.4g} h ({data['gpu_hours']:,.4g} GPU-h)"),
        ("price", f"{money_text(data['price_per_gpu_hour'], currency, rate=True)} per "
                  "GPU-hour"),
        ("billing", f"{data['billing_seconds']} s increments, minimum "
                    f"{data['billing_minimum_seconds']} s; billed "
                    f"{data['billed_hours']:,.6g} h"),
        ("cost per run", money_text(data["cost"], currency)),
    ]
    if data["flops"] is not None:
        pairs.insert(1, ("FLOPs", f"{data['flops']:.4g}"))
    offer = data["offer"]
    if offer is not None:
        pairs.append(("offer", f"{offer['provider']} {offer['instance_type']} "
                               f"{offer['region']} {offer['category']} x{data['instances']}, "
                               f"seen {offer['observed_at']}"))
        pairs.extend(_fx_lines(offer))
    if data["instance_share"]:
        pairs.append(("instance", data["instance_share"]))
    if "cost_per_success" in data:
        pairs.append(("cost per success", money_text(data["cost_per_success"], currency)))
    pairs.append(("runs per day", str(data["runs_per_day"])))
    if "time_to_result_hours" in data:
        pairs.append(("time to result", f"{data['time_to_result_hours']:,.4g} h for "
                                        f"{experiments} on {parallel} slot(s)"))
    return field_lines(pairs, data["warnings"])


# spot -----------------------------------------------------------------------------------------


def _fx_lines(*offers: dict[str, Any] | None) -> list[tuple[str, str]]:
    """`exchange rate` lines for the document's offers that --currency converted (rate and
    its ECB day)."""
    lines = []
    for offer in offers:
        fx = offer.get("fx") if offer is not None else None
        if offer is not None and fx:
            lines.append(("exchange rate", f"1 {fx['from']} = {fx['rate']} {offer['currency']} "
                                           f"(ECB, {fx['rate_date']}); quoted "
                                           f"{fx['quoted_price_per_hour']} {fx['from']}/h"))
    return lines


# breakeven ------------------------------------------------------------------------------------


# compare --------------------------------------------------------------------------------------

COMPARE_COLUMNS = ["gpu", "count", "provider", "category", "ownership", "wall_hours", "cost",
                   "price_per_gpu_hour", "instance_type", "instances", "region"]


@click.command()
@workload_options
@_api_options
@click.option("--gpu", "gpu_names", multiple=True,
              help="Only these GPU models (repeatable). Default: every GPU with prices.")
@provider_option()
@category_option(purpose=" (default: all)")
@region_option()
@as_of_option()
@economics_currency_options("--api-price-per-million-*")
@click.option("--max-gpus", type=WHOLE_GPUS, default=64, show_default=True,
              help="Largest GPU count to consider.")
@click.option("--limit", type=ROW_LIMIT, help="At most this many rows.")
@click.option("--allow-unclustered", is_flag=True, help=ALLOW_UNCLUSTERED_HELP)
@click.option("--owned-utilization", type=OPEN_DECIMAL_FRACTION,
              help="Share of hours owned GPUs work, for hardware quotes' owned cost per "
                   "GPU-hour (default: [economics] owned_utilization, 0.6).")
@format_option
@pass_app
def compare(app: AppContext, gpu_names: tuple[str, ...], providers: tuple[str, ...],
            categories: tuple[str, ...], regions: tuple[str, ...], as_of: datetime | None,
            currency: str | None, price_currency: str | None, max_gpus: int,
            limit: int | None, allow_unclustered: bool,
            owned_utilization: Decimal | None, fmt: str,
            api_price_per_million_input: Decimal | None,
            api_price_per_million_output: Decimal | None, **options: Any) -> None:
    """Every GPU model and count that fits one workload, priced per run and ranked.

    For each GPU with stored prices, counts from the offers' sizes up to --max-gpus that
    fit the job are sized (wall time, each offer's instance as a node) and priced with the
    cheapest run per provider and category.

    With --workload inference (the default) and no --tokens: every GPU, count, TP plan and
    offer that meets the service level, ranked by cost per million output tokens.
    """
    from tracker.answers import pricing
    from tracker.cli.commands.currencies import economics_currencies

    workload, spec = workload_request(options)
    money = economics_currencies(
        app, currency, price_currency, as_of=as_of, given={
            "--api-price-per-million-input": api_price_per_million_input,
            "--api-price-per-million-output": api_price_per_million_output})
    settings, currency = money.settings, money.display
    api_price_per_million_input = money.given(api_price_per_million_input)
    api_price_per_million_output = money.given(api_price_per_million_output)
    for note_text in money.notes:
        app.note(note_text)
    if max_gpus < 1:
        raise InvalidInput(f"--max-gpus must be at least 1, got {max_gpus}")
    from tracker.store.known import check_filters

    check_filters(app.db, providers, regions)
    if wants_serving(workload) and workload.get("tokens") is None:
        wanted = resolve_gpus(gpu_names, app) or None
        if not has_model(workload):
            raise InvalidInput("give --model (or --params) to compare serving costs")
        found, skipped, offer_rows = pricing.serving_deployments(
            app.db, workload=workload, spec=spec, settings=settings, max_gpus=max_gpus,
            as_of=as_of, currency=currency, gpus=wanted, providers=list(providers),
            regions=list(regions), categories=list(categories),
            api_price_per_million_input=api_price_per_million_input,
            api_price_per_million_output=api_price_per_million_output,
            owned_utilization=owned_utilization)
        # With nothing found the error names the first reasons itself, in one line.
        if found:
            _note_skipped(app, skipped)
        ranked = serving_compare_rows(found, skipped=skipped,
                                      priced_gpus=[r.gpu for r in offer_rows],
                                      max_gpus=max_gpus, as_of=as_of, limit=limit)
        table = None
        if fmt == "table":
            from tracker.cli.commands.printing import render_table, rows_for_people

            table = render_table(rows_for_people(
                ranked, money=("cost_per_month",),
                rates=("cost_per_million_output_tokens",
                       "cost_per_million_output_tokens_at_load", "price_per_gpu_hour")),
                SERVING_COMPARE_COLUMNS)
        emit(ranked, fmt, SERVING_COMPARE_COLUMNS if fmt != "json" else None, table_text=table)
        return
    if not has_model(workload) or workload.get("tokens") is None:
        raise InvalidInput("give --model (or --params) and --tokens to compare run costs")
    positive(workload["tokens"], "--tokens")
    wanted = resolve_gpus(gpu_names, app) or None
    absent: list[str] = []
    rows, skipped = pricing.compare_runs(
        app.db, workload=workload, billing=settings.billing, max_gpus=max_gpus, as_of=as_of,
        currency=currency, gpus=wanted, providers=list(providers), regions=list(regions),
        categories=list(categories), limit=limit, settings=settings,
        owned_utilization=owned_utilization, overrides=_fabric_overrides(app),
        allow_unclustered=allow_unclustered, absent=absent)
    _note_skipped(app, skipped)
    from tracker.answers.candidates import group_absent

    _note_single_instance(app, group_absent(absent))
    table = None
    if fmt == "table":
        from tracker.cli.commands.printing import render_table, rows_for_people
        from tracker.economics.owned import owned_notes

        shown = rows_for_people(rows, money=("cost",), rates=("price_per_gpu_hour",))
        table = "\n".join([render_table(shown, COMPARE_COLUMNS), *owned_notes(rows)])
    emit(rows, fmt, COMPARE_COLUMNS if fmt != "json" else None, table_text=table)
