"""Economics commands: cost, compare, spot, breakeven (the click layer).

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
    BREAKEVEN_KEYS,
    COMPARE_KEYS,
    COST_KEYS,
    SERVING_COMPARE_COLUMNS,
    SPOT_KEYS,
    BreakevenDocument,
    CostDocument,
    SpotDocument,
    as_of_text,
    breakeven_document,
    cost_document,
    hardware_costs,
    serving_compare_rows,
    serving_cost_document,
    spot_document,
)
from tracker.answers.workloads import wants_serving, workload_request
from tracker.categories import CATEGORIES
from tracker.commands import AppContext, pass_app
from tracker.commands.params import (
    COUNT,
    DECIMAL_FRACTION,
    GPU_COUNT,
    HOURS,
    MINUTES,
    MONEY,
    MONTHS,
    MTTI_HOURS,
    NODES,
    NON_NEGATIVE_COUNT,
    OPEN_DECIMAL_FRACTION,
    POSITIVE_HOURS,
    RATIO,
    ROW_LIMIT,
    SECONDS,
    WHOLE_GPUS,
    YEARS,
    BoundedDecimal,
    BoundedFloat,
    Instant,
    resolve_gpus,
)
from tracker.commands.printing import emit, format_option
from tracker.commands.workload import GPU_OPTION, workload_options
from tracker.economics import defaults as econ_defaults
from tracker.economics.units import CENT, RATE_PLACES, money_out, positive
from tracker.errors import InvalidInput

__all__ = ["BREAKEVEN_KEYS", "COMPARE_KEYS", "COST_KEYS", "SPOT_KEYS", "breakeven", "compare",
           "cost", "spot"]

# Unbounded shapes (the bounded ones live in tracker.commands.params, with the checks).
DECIMAL = BoundedDecimal()
NUMBER = BoundedFloat()
DISCOUNT_RATE = BoundedDecimal(-1, 10, min_open=True, why="a sanity bound")  # -100%..1000%/yr
HOURS_PER_MONTH = BoundedDecimal(0, 744, min_open=True, why="31 days")


ALLOW_UNCLUSTERED_HELP = ("Let a job span instances that have no cluster network (joined "
                          "over 10 Gb/s TCP, an assumption); shown in the output.")


def _fabric_overrides(app: AppContext) -> dict[str, Any]:
    """`[fabric.overrides]` from the configuration (tracker.fabric.parse_overrides)."""
    from tracker.fabric import parse_overrides

    return parse_overrides(app.config["fabric"])


def _settings(app: AppContext) -> econ_defaults.EconomicsSettings:
    return econ_defaults.EconomicsSettings.from_config(app.config)


def _money_text(amount: Decimal | None, currency: str, places: Decimal = CENT) -> str:
    if amount is None:
        return "-"
    exponent = places.as_tuple().exponent
    assert isinstance(exponent, int)  # places is a finite quantum (CENT and the like)
    digits = max(0, -exponent)
    return f"{money_out(amount, places):,.{digits}f} {currency}"


def _lines(pairs: list[tuple[str, str]], warnings: list[str] | tuple[str, ...] = ()) -> str:
    width = max(len(label) for label, _ in pairs)
    out = [f"{label.ljust(width)}  {value}" for label, value in pairs]
    out.extend(f"warning: {w}" for w in warnings)
    return "\n".join(out)


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
@click.option("--provider", help="Store price: only this provider.")
@click.option("--region", help="Store price: only this region.")
@click.option("--category", type=click.Choice(CATEGORIES), default="on-demand",
              show_default=True, help="Store price: pricing category.")
@click.option("--as-of", type=Instant(end_of_day=True),
              help="Store price valid at this date (UTC; a bare date = end of day). Default: now.")
@click.option("--currency", help="Currency of the price (default: [economics] currency, USD); "
              "stored prices in other currencies are converted at their day's ECB rate.")
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
         price_per_gpu_hour: Decimal | None, provider: str | None, region: str | None,
         category: str, as_of: datetime | None, currency: str | None,
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
    from tracker.money import check_currency

    workload, spec = workload_request(options)
    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    positive(count, "--count")
    if hours is not None:
        positive(hours, "--hours")
    gpu_id = resolve_gpus([gpu], app)[0] if gpu else None
    if hours is None and wants_serving(workload):
        _cost_serving(app, settings, workload, spec, gpu_id=gpu_id, count=count,
                      price=price_per_gpu_hour, provider=provider, region=region,
                      category=category, as_of=as_of, currency=currency, fmt=fmt,
                      api_in=api_price_per_million_input, api_out=api_price_per_million_output)
        return
    if api_price_per_million_input is not None or api_price_per_million_output is not None:
        raise InvalidInput("--api-price-per-million-* compare serving costs; use --workload "
                           "inference without --hours")
    if hours is None and (gpu_id is None or (
            workload.get("model") is None and workload.get("params") is None)
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
        provider=provider, billing_seconds=billing_seconds,
        billing_minimum_seconds=billing_minimum_seconds, success_rate=success_rate,
        fail_fraction=fail_fraction, experiments=experiments, parallel=parallel,
        slot_utilization=slot_utilization)
    emit(answer.data, fmt, table_text=_cost_table(answer, experiments, parallel))


def _cost_serving(app: AppContext, settings: econ_defaults.EconomicsSettings,
                  workload: dict[str, Any], spec: Any, *, gpu_id: str | None, count: float,
                  price: Decimal | None, provider: str | None, region: str | None,
                  category: str, as_of: datetime | None, currency: str, fmt: str,
                  api_in: Decimal | None, api_out: Decimal | None) -> None:
    """`cost -w inference`: one deployment of --count GPUs priced per token."""
    from tracker.answers.documents import whole_count
    from tracker.sizing import SizingRequest, size_workload
    from tracker.sizing.serving import serve

    if gpu_id is None or (workload.get("model") is None and workload.get("params") is None
                          and workload.get("layers") is None):
        raise InvalidInput("give --hours, or --model (or --params) and --gpu for the sizing "
                           "engine to price serving per token (or -w pretrain etc. with "
                           "--tokens for a training run)")
    gpus = whole_count(count)
    tokens = workload.get("tokens")
    if tokens is not None:
        positive(tokens, "--tokens")
    fields = {k: v for k, v in workload.items() if k != "tokens"}
    offer = instances = None
    if price is None:
        from tracker.answers import pricing

        found, skipped, _rows = pricing.serving_deployments(
            app.db, workload=fields, spec=spec, settings=settings, max_gpus=gpus,
            as_of=as_of, currency=currency, gpus=[gpu_id],
            providers=[provider] if provider else None, regions=[region] if region else None,
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
        request = SizingRequest(gpu=gpu_id, count=gpus,
                                **{**fields, "gpus_per_node": best.offer.gpu_count
                                   if fields.get("gpus_per_node") is None else
                                   fields["gpus_per_node"]})
    else:
        request = SizingRequest(gpu=gpu_id, count=gpus, **fields)
        served = serve(request, spec)
    sized = size_workload(request) if price is not None else None
    data = serving_cost_document(
        settings, served=served, price=price, count=gpus, currency=currency, offer=offer,
        instances=instances, provider=provider, tokens=tokens,
        sizing_warnings=tuple(sized.warnings) if sized else (),
        api_price_per_million_input=api_in, api_price_per_million_output=api_out)
    emit(data, fmt, table_text=_serving_cost_table(data, offer) if fmt == "table" else None)


def _serving_cost_table(data: dict[str, Any], offer_row: Any = None) -> str:
    from tracker.commands.size import render_serving_lines

    currency = data["currency"]
    places = Decimal("0.000001")
    pairs = [
        ("GPU", f"{data['count']} x {data['gpu']}"),
        ("price", f"{_money_text(data['price_per_gpu_hour'], currency, RATE_PLACES)} per "
                  "GPU-hour"),
        ("per million output tokens", _money_text(data["cost_per_million_output_tokens"],
                                                  currency, RATE_PLACES)),
        ("per million tokens (in+out)", _money_text(data["cost_per_million_tokens"], currency,
                                                    RATE_PLACES)),
        ("per request", _money_text(data["cost_per_request"], currency, places)),
    ]
    if data["cost_per_month"] is not None:
        pairs.append(("per month at the load", _money_text(data["cost_per_month"], currency)))
        pairs.append(("per million output at the load", _money_text(
            data["cost_per_million_output_tokens_at_load"], currency, RATE_PLACES)))
    if data.get("cost") is not None:
        pairs.append(("cost of --tokens", f"{_money_text(data['cost'], currency)} over "
                                          f"{data['wall_hours']:,.4g} h"))
    if "api_cost_per_million_output_tokens" in data:
        pairs.append(("API per million output", _money_text(
            data["api_cost_per_million_output_tokens"], currency, RATE_PLACES)))
        breakeven = data["breakeven_output_tokens_per_day"]
        pairs.append(("cheaper than the API above", "never (the API is cheaper per token)"
                      if breakeven is None else f"{breakeven:,} output tokens/day"))
        if data.get("monthly_saving_vs_api") is not None:
            pairs.append(("saving vs API per month", _money_text(data["monthly_saving_vs_api"],
                                                                 currency)))
    offer = data.get("offer")
    if offer:
        pairs.append(("offer", f"{offer['provider']} {offer['instance_type']} "
                               f"{offer['region']} {offer['category']} x{data['instances']}"))
        pairs.extend(_fx_lines(offer_row))
    text = _lines(pairs)
    lines = [text, "", *render_serving_lines(data["serving"])]
    lines.extend(f"warning: {w}" for w in data["warnings"]
                 if w not in data["serving"].get("warnings", ()))
    return "\n".join(lines)


def _cost_table(answer: CostDocument, experiments: int | None, parallel: int) -> str:
    data, run, rule, flops, offer = (answer.data, answer.run, answer.billing, answer.flops,
                                     answer.offer)
    currency = data["currency"]
    pairs = [
        ("GPU", f"{data['count']:g} x {data['gpu'] or '(given price)'}"),
        ("wall time", f"{run.wall_hours:,.4g} h ({run.gpu_hours:,.4g} GPU-h)"),
        ("price", f"{_money_text(data['price_per_gpu_hour'], currency, RATE_PLACES)} per "
                  "GPU-hour"),
        ("billing", f"{rule.granularity_seconds} s increments, minimum "
                    f"{rule.minimum_seconds} s; billed {float(run.billed_hours):,.6g} h"),
        ("cost per run", _money_text(run.cost, currency)),
    ]
    if flops is not None:
        pairs.insert(1, ("FLOPs", f"{flops:.4g}"))
    if offer is not None:
        pairs.append(("offer", f"{offer.provider} {offer.instance_type} {offer.region} "
                               f"{offer.category} x{data['instances']}, seen "
                               f"{as_of_text(offer.observed_at)}"))
        pairs.extend(_fx_lines(offer))
    if "cost_per_success" in data:
        pairs.append(("cost per success", _money_text(data["cost_per_success"], currency)))
    pairs.append(("runs per day", str(data["runs_per_day"])))
    if "time_to_result_hours" in data:
        pairs.append(("time to result", f"{data['time_to_result_hours']:,.4g} h for "
                                        f"{experiments} on {parallel} slot(s)"))
    return _lines(pairs, data["warnings"])


# spot -----------------------------------------------------------------------------------------

@click.command()
@click.option("--work-hours", type=HOURS, required=True,
              help="Failure-free compute time Ts of the job (hours).")
@click.option("--mtti-hours", type=MTTI_HOURS,
              help="Mean time to interruption of ONE node (hours). Default: the stored Spot "
                   "Advisor band for --instance/--region, else the provider default.")
@click.option("--checkpoint-minutes", type=MINUTES, required=True,
              help="Time δ to write one checkpoint (minutes).")
@click.option("--restart-minutes", type=MINUTES, required=True,
              help="Time R to get going again after an interruption (minutes).")
@click.option("--nodes", type=NODES, default=1, show_default=True,
              help="Instances in the job (M_job = M_node / nodes).")
@click.option("--provider", help="Provider (aws, gcp, azure, ...): notice window, defaults, "
                                 "store prices.")
@click.option("--instance", help="Instance type, for store prices and the interruption band.")
@click.option("--gpu", help="GPU of the plan: consider every stored spot or bid offer whose "
                            "instances can make up --count GPUs (any instance size).")
@click.option("--count", "plan_gpus", type=int, default=None,
              help="GPUs in the plan, with --gpu (default 8).")
@click.option("--region", help="Region, for store prices and the interruption band.")
@click.option("--as-of", type=Instant(end_of_day=True),
              help="Prices and bands valid at this date (UTC). Default: now.")
@click.option("--spot-price", type=MONEY, help="Spot price per instance-hour.")
@click.option("--on-demand-price", type=MONEY, help="On-demand price per instance-hour.")
@click.option("--currency", help="Currency (default: [economics] currency, USD); stored "
              "prices in other currencies are converted at their day's ECB rate.")
@click.option("--notice-window", is_flag=True,
              help="Take an emergency checkpoint inside the provider's notice window.")
@click.option("--notice-seconds", type=SECONDS,
              help="Notice window length (default: AWS 120, GCP 30, Azure 30).")
@click.option("--emergency-checkpoint-minutes", type=MINUTES,
              help="Time of the emergency checkpoint (default: --checkpoint-minutes).")
@click.option("--unbilled-wait-minutes", type=MINUTES, default=0.0, show_default=True,
              help="Part of each restart spent waiting for capacity, not billed.")
@click.option("--interval-minutes", type=MINUTES,
              help="Use this checkpoint interval instead of Daly's optimum.")
@click.option("--on-demand-mtti-hours", type=MTTI_HOURS,
              help="Checkpoint on on-demand too, with this node MTTI (default: no checkpoints).")
@click.option("--max-runtime-hours", type=POSITIVE_HOURS,
              help="Forced stop after this long (a checkpoint and a restart each time).")
@click.option("--legacy-preemptible", is_flag=True,
              help="GCP legacy preemptible VM: forced stop every 24 h (Spot VMs have none).")
@click.option("--deadline-hours", type=POSITIVE_HOURS, help="Deadline D (hours).")
@format_option
@pass_app
def spot(app: AppContext, work_hours: float, mtti_hours: float | None,
         checkpoint_minutes: float, restart_minutes: float, nodes: int, provider: str | None,
         instance: str | None, gpu: str | None, plan_gpus: int | None, region: str | None,
         as_of: datetime | None,
         spot_price: Decimal | None, on_demand_price: Decimal | None, currency: str | None,
         notice_window: bool, notice_seconds: float | None,
         emergency_checkpoint_minutes: float | None, unbilled_wait_minutes: float,
         interval_minutes: float | None, on_demand_mtti_hours: float | None,
         max_runtime_hours: float | None, legacy_preemptible: bool,
         deadline_hours: float | None, fmt: str) -> None:
    """Spot with checkpoints vs on-demand: Daly's interval, expected time, cost, deadline.

    Prices per instance-hour are given (--spot-price, --on-demand-price) or looked up for
    --instance in --region (default provider aws) as of --as-of. With --gpu and --count, every
    stored spot or bid offer of any instance size that can make up the plan is planned and
    the best kept (--on-demand-price is then per GPU-hour).
    """
    from tracker.economics.spot import SpotInputs
    from tracker.money import check_currency

    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    for value, what in ((work_hours, "--work-hours"), (checkpoint_minutes, "--checkpoint-minutes"),
                        (restart_minutes, "--restart-minutes"),
                        (unbilled_wait_minutes, "--unbilled-wait-minutes"),
                        (emergency_checkpoint_minutes, "--emergency-checkpoint-minutes"),
                        (notice_seconds, "--notice-seconds")):
        if value is not None:
            positive(value, what, allow_zero=True)
    for value, what in ((mtti_hours, "--mtti-hours"), (deadline_hours, "--deadline-hours"),
                        (interval_minutes, "--interval-minutes"),
                        (on_demand_mtti_hours, "--on-demand-mtti-hours"),
                        (max_runtime_hours, "--max-runtime-hours")):
        if value is not None:
            positive(value, what)
    if nodes < 1:
        raise InvalidInput(f"--nodes must be at least 1, got {nodes}")
    if legacy_preemptible and max_runtime_hours is None:
        max_runtime_hours = settings.max_runtime_hours("gcp-preemptible")
    if gpu is not None and (instance or spot_price is not None):
        raise InvalidInput("give --gpu (with --count) or --instance / --spot-price, not both")
    if gpu is not None:
        answer = _spot_for_plan(
            app, settings, gpu=gpu, count=plan_gpus or 8, work_hours=work_hours,
            mtti_hours=mtti_hours, checkpoint_minutes=checkpoint_minutes,
            restart_minutes=restart_minutes, provider=provider, region=region, as_of=as_of,
            currency=currency, on_demand_price=on_demand_price, notice_window=notice_window,
            notice_seconds=notice_seconds, unbilled_wait_minutes=unbilled_wait_minutes,
            emergency_checkpoint_minutes=emergency_checkpoint_minutes,
            interval_minutes=interval_minutes, on_demand_mtti_hours=on_demand_mtti_hours,
            max_runtime_hours=max_runtime_hours, deadline_hours=deadline_hours)
        emit(answer.data, fmt, table_text=_spot_table(answer))
        return
    if instance and not provider:
        provider = "aws"
    provider = provider.lower() if provider else None

    if mtti_hours is not None:
        mtti, mtti_source = mtti_hours, "given"
    else:
        found = None
        if instance and region:
            from tracker.answers import pricing

            found = pricing.band_mtti(app.db, settings, provider=provider or "aws",
                                      region=region, instance=instance, as_of=as_of)
        mtti, mtti_source = found or settings.default_mtti_hours(provider)

    spot_row = od_row = None
    if instance and spot_price is None:
        from tracker.answers import pricing

        spot_row = pricing.instance_price(app.db, provider=provider or "aws", region=region,
                                          instance=instance, category="spot", as_of=as_of,
                                          currency=currency)
        spot_price = spot_row.price_per_hour
    if instance and on_demand_price is None:
        from tracker.answers import pricing

        od_row = pricing.instance_price(app.db, provider=provider or "aws", region=region,
                                        instance=instance, category="on-demand", as_of=as_of,
                                        currency=currency)
        on_demand_price = od_row.price_per_hour

    notice_hours = None
    if notice_window:
        seconds = notice_seconds if notice_seconds is not None else settings.notice_seconds(
            provider)
        if seconds is None:
            known = ", ".join(settings.notice_providers())
            raise InvalidInput(f"--notice-window needs --notice-seconds or --provider with a "
                               f"known notice ({known})")
        notice_hours = seconds / 3600.0

    answer = spot_document(SpotInputs(
        work_hours=work_hours, mtti_node_hours=mtti, checkpoint_hours=checkpoint_minutes / 60,
        restart_hours=restart_minutes / 60, nodes=nodes,
        spot_price_per_node_hour=spot_price, on_demand_price_per_node_hour=on_demand_price,
        deadline_hours=deadline_hours, unbilled_wait_hours=unbilled_wait_minutes / 60,
        notice_window_hours=notice_hours,
        emergency_checkpoint_hours=None if emergency_checkpoint_minutes is None
        else emergency_checkpoint_minutes / 60,
        on_demand_mtti_node_hours=on_demand_mtti_hours, max_runtime_hours=max_runtime_hours,
        interval_hours=None if interval_minutes is None else interval_minutes / 60,
    ), mtti_source=mtti_source, currency=currency, spot_offer=spot_row, on_demand_offer=od_row)
    emit(answer.data, fmt, table_text=_spot_table(answer))


def _spot_for_plan(app: AppContext, settings: econ_defaults.EconomicsSettings, *, gpu: str,
                   count: int, work_hours: float, mtti_hours: float | None,
                   checkpoint_minutes: float, restart_minutes: float, provider: str | None,
                   region: str | None, as_of: datetime | None, currency: str,
                   on_demand_price: Decimal | None, notice_window: bool,
                   notice_seconds: float | None, unbilled_wait_minutes: float,
                   emergency_checkpoint_minutes: float | None,
                   interval_minutes: float | None, on_demand_mtti_hours: float | None,
                   max_runtime_hours: float | None, deadline_hours: float | None
                   ) -> SpotDocument:
    from tracker.answers import pricing
    from tracker.economics.spot import SpotInputs

    if count < 1:
        raise InvalidInput(f"--count must be at least 1, got {count}")
    base = SpotInputs(
        work_hours=work_hours, mtti_node_hours=1.0, checkpoint_hours=checkpoint_minutes / 60,
        restart_hours=restart_minutes / 60, deadline_hours=deadline_hours,
        unbilled_wait_hours=unbilled_wait_minutes / 60,
        emergency_checkpoint_hours=None if emergency_checkpoint_minutes is None
        else emergency_checkpoint_minutes / 60,
        on_demand_mtti_node_hours=on_demand_mtti_hours, max_runtime_hours=max_runtime_hours,
        interval_hours=None if interval_minutes is None else interval_minutes / 60)
    return pricing.spot_for_plan(
        app.db, settings, base, gpu=resolve_gpus([gpu], app)[0], count=count,
        mtti_hours=mtti_hours, as_of=as_of, provider=provider.lower() if provider else None,
        region=region, currency=currency, on_demand_price_per_gpu_hour=on_demand_price,
        notice_window=notice_window, notice_seconds=notice_seconds)


def _fx_lines(*offers: Any) -> list[tuple[str, str]]:
    """`exchange rate` lines for offers that --currency converted (rate and its ECB day)."""
    lines = []
    for offer in offers:
        fx = (offer.attributes or {}).get("fx") if offer is not None else None
        if fx:
            lines.append(("exchange rate", f"1 {fx['from']} = {fx['rate']} {offer.currency} "
                                           f"(ECB, {fx['rate_date']}); quoted "
                                           f"{fx['quoted_price_per_hour']} {fx['from']}/h"))
    return lines


def _spot_table(answer: SpotDocument) -> str:
    inputs, plan, data = answer.inputs, answer.plan, answer.data
    currency = data["currency"]
    # A plan that is not viable always names its reason (tracker.economics.spot).
    head = [plan.not_viable_reason] if plan.not_viable_reason is not None else []
    pairs = [
        ("work", f"{inputs.work_hours:g} h on {inputs.nodes} node(s)"),
        ("MTTI", f"{inputs.mtti_node_hours:,.4g} h per node, {plan.mtti_job_hours:,.4g} h per "
                 f"job ({data['mtti_source']})"),
    ]
    if data["expected_wall_hours"] is not None:  # None: interruptions leave no time to work
        pairs += [
            ("checkpoint interval", f"{plan.checkpoint_interval_hours * 60:,.4g} min (Daly); "
                                    f"Young {plan.young_interval_hours * 60:,.4g} min"),
            ("expected wall time", f"{plan.expected_wall_hours:,.4g} h "
                                   f"(+{plan.overhead_fraction:.1%} overhead)"),
            ("expected interruptions", f"{plan.expected_interruptions:,.3g}"),
        ]
    if plan.spot_cost is not None:
        pairs.append(("spot cost", _money_text(plan.spot_cost, currency)))
    if plan.on_demand_cost is not None:
        pairs.append(("on-demand cost", _money_text(plan.on_demand_cost, currency)))
    if plan.savings_fraction is not None:
        pairs.append(("savings", f"{plan.savings_fraction:.1%}"))
    if inputs.deadline_hours is not None:
        pairs.append(("meets deadline", "yes" if plan.meets_deadline else "no"))
    if plan.mixed_cost is not None:
        pairs.append(("spot + on-demand", _money_text(plan.mixed_cost, currency)))
    offer = data.get("spot_offer")
    if offer is not None:
        where = f" {offer['region']}" if offer["region"] else ""
        shape = f"{inputs.nodes} x {offer['instance_type']}{where} ({offer['category']})"
        if "plan_gpus" in data:
            shape += (f", {data['gpus']} GPUs for a {data['plan_gpus']}-GPU plan, best of "
                      f"{data['offers_considered']} offers")
        pairs.append(("spot offer", f"{offer['provider']} {shape}"))
    warnings = [w for w in data["warnings"] if w != plan.not_viable_reason]
    return "\n".join([*head, _lines(pairs, warnings)])


# breakeven ------------------------------------------------------------------------------------

@click.command()
@click.option("--capex", type=MONEY,
              help="Hardware cost (servers or GPUs). Default with --gpu: the per-GPU default x "
                   "count, plus networking per GPU.")
@click.option("--networking-per-gpu", type=MONEY,
              help="Networking per GPU added to capex (default: only with capex from --gpu).")
@click.option("--storage", type=MONEY, default=Decimal(0), help="Storage capex.")
@click.option("--install", type=MONEY, default=Decimal(0), help="Installation capex.")
@click.option("--power-kw", type=MONEY, help="Rated IT power in kW (default with --gpu).")
@click.option("--power-factor", type=DECIMAL_FRACTION,
              help="Average share of rated power drawn (1).")
@click.option("--pue", type=RATIO, help="Power usage effectiveness (1.3).")
@click.option("--kwh-price", type=MONEY, help="Electricity price per kWh (0.08).")
@click.option("--colo-per-kw-month", type=MONEY, help="Colocation per kW-month (150).")
@click.option("--staff-per-month", type=MONEY,
              help="Staff and maintenance per month (1000 per 8-GPU node).")
@click.option("--other-opex-per-month", type=MONEY, help="Other monthly opex (0).")
@click.option("--cloud-price-per-hour", type=MONEY,
              help="Cloud price per hour for the same GPUs (else from the store with --gpu).")
@click.option("--offer", "offer_id", type=int,
              help="Stored offer id to rent instead (`offer_id` in compare/cost JSON; default: "
                   "the cheapest on-demand offer with the same GPUs in one node).")
@click.option("--gpu", help="GPU model: store price, capex and power defaults.")
@click.option("--count", type=GPU_COUNT, help="GPUs bought and rented (default 8).")
@click.option("--provider", help="Store price: only this provider.")
@click.option("--region", help="Store price: only this region.")
@click.option("--category", type=click.Choice(CATEGORIES), default="on-demand",
              show_default=True, help="Store price: pricing category.")
@click.option("--as-of", type=Instant(end_of_day=True), help="Store price valid at this date.")
@click.option("--currency", help="Currency (default: [economics] currency, USD); stored "
              "prices in other currencies are converted at their day's ECB rate.")
@click.option("--utilization", type=OPEN_DECIMAL_FRACTION, required=True,
              help="Share of hours the GPUs would be rented, in (0, 1].")
@click.option("--horizon-months", type=MONTHS, help="Months the hardware is kept (36).")
@click.option("--residual-fraction", type=DECIMAL_FRACTION,
              help="Resale share of capex at the horizon.")
@click.option("--discount-rate", type=DISCOUNT_RATE, help="Annual discount rate (0.10).")
@click.option("--hours-per-month", type=HOURS_PER_MONTH,
              help="Hours per month (730; 720 = 30 days).")
@click.option("--depreciation", type=click.Choice(["sl", "ddb", "macrs5"]),
              help="Add a depreciation schedule (straight line, double declining, MACRS 5-yr).")
@click.option("--depreciation-years", type=YEARS,
              help="Book life for sl/ddb (default: the horizon in whole years).")
@format_option
@pass_app
def breakeven(app: AppContext, capex: Decimal | None, networking_per_gpu: Decimal | None,
              storage: Decimal, install: Decimal, power_kw: Decimal | None,
              power_factor: Decimal | None, pue: Decimal | None, kwh_price: Decimal | None,
              colo_per_kw_month: Decimal | None, staff_per_month: Decimal | None,
              other_opex_per_month: Decimal | None, cloud_price_per_hour: Decimal | None,
              offer_id: int | None, gpu: str | None, count: float | None,
              provider: str | None, region: str | None,
              category: str, as_of: datetime | None, currency: str | None,
              utilization: Decimal, horizon_months: int | None,
              residual_fraction: Decimal | None, discount_rate: Decimal | None,
              hours_per_month: Decimal | None, depreciation: str | None,
              depreciation_years: int | None, fmt: str) -> None:
    """Rent vs buy: monthly costs, payback, NPV and IRR of buying, breakeven utilization.

    Give --capex, --power-kw and --cloud-price-per-hour, or --gpu and --count to take the
    capex and power defaults and the cheapest stored cloud price as of --as-of.
    """
    from tracker.money import check_currency

    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    gpu_id = resolve_gpus([gpu], app)[0] if gpu else None
    gpus = Decimal(repr(count)) if count is not None else settings.value("gpus_per_node")
    positive(float(gpus), "--count")
    bought = hardware_costs(settings, gpu=gpu_id, gpus=gpus, capex=capex,
                            networking_per_gpu=networking_per_gpu, storage=storage,
                            install=install, power_kw=power_kw)
    offer = comparator = None
    if cloud_price_per_hour is not None and offer_id is not None:
        raise InvalidInput("give --offer or --cloud-price-per-hour, not both")
    if cloud_price_per_hour is None:
        if gpu_id is None and offer_id is None:
            raise InvalidInput("give --cloud-price-per-hour, or --gpu to price from the store")
        from tracker.answers import pricing

        cloud_price_per_hour, offer, comparator = pricing.cloud_price(
            app.db, gpu=gpu_id, gpus=gpus, as_of=as_of, provider=provider, region=region,
            category=category, currency=currency, offer_id=offer_id)
    answer = breakeven_document(
        settings, bought, gpus=gpus, cloud_price_per_hour=cloud_price_per_hour,
        utilization=utilization, currency=currency, offer=offer, comparator=comparator,
        pue=pue, kwh_price=kwh_price,
        colo_per_kw_month=colo_per_kw_month, staff_per_month=staff_per_month,
        other_opex_per_month=other_opex_per_month, residual_fraction=residual_fraction,
        discount_rate=discount_rate, hours_per_month=hours_per_month,
        power_factor=power_factor, horizon_months=horizon_months, depreciation=depreciation,
        depreciation_years=depreciation_years)
    emit(answer.data, fmt, table_text=_breakeven_table(answer, with_sensitivity=fmt == "table"))


def _payback_text(value: str, inside: bool, months: Any, horizon: int) -> str:
    if months is None and not inside:
        return f"not within {horizon} months"
    return value


def _share_text(value: Any, bound: str | None) -> str:
    if bound is not None:
        return bound
    return "-" if value is None else f"{value:.1%}"


def _breakeven_table(answer: BreakevenDocument, *, with_sensitivity: bool) -> str:
    inputs, result, data = answer.inputs, answer.result, answer.data
    currency = data["currency"]
    horizon = inputs.horizon_months
    parts = [f"power {_money_text(result.monthly_power, currency)}",
             f"colo {_money_text(result.monthly_colo, currency)}",
             f"staff {_money_text(result.monthly_staff, currency)}"]
    if result.monthly_other_opex:
        parts.append(f"other {_money_text(result.monthly_other_opex, currency)}")
    breakeven = _share_text(data["breakeven_utilization"], data["breakeven_bound"])
    if data["breakeven_bound"] == "never":
        breakeven = f"never within {horizon} months (above 100%)"
    elif data["breakeven_bound"] == "always":
        breakeven = "always (buying pays even at 0%)"
    else:
        breakeven += f" over {horizon} months"
    pairs = [
        ("capex", _money_text(data["capex"], currency)),
        ("on-prem opex / month", _money_text(result.monthly_onprem_opex, currency)
         + f" = {' + '.join(parts)}"),
        ("cloud / month", _money_text(result.monthly_cloud_cost, currency)
         + f" ({float(inputs.utilization):.0%} of {inputs.hours_per_month} h at "
           f"{_money_text(data['cloud_price_per_hour'], currency, RATE_PLACES)}/h)"),
        ("cloud comparator", data["comparator"]),
        ("payback", "never" if result.payback_months is None else _payback_text(
            f"{result.payback_months:.2f} months", data["payback_within_horizon"],
            data["payback_months"], horizon)),
        ("discounted payback", "never" if result.discounted_payback_month is None
         else _payback_text(f"month {result.discounted_payback_month}",
                            data["discounted_payback_within_horizon"],
                            data["discounted_payback_month"], horizon)),
        ("breakeven utilization", breakeven),
        (f"NPV buy - rent (at {float(inputs.discount_rate):.1%}/yr)",
         _money_text(result.npv, currency)),
        ("IRR", "-" if result.irr_monthly is None
         else f"{result.irr_monthly:.3%}/month, {result.irr_annual:.2%}/year"),
        ("owned cost / GPU-hour", _money_text(result.owned_cost_per_gpu_hour, currency,
                                              RATE_PLACES)),
    ]
    headline = f"verdict: {data['verdict']} -- {data['verdict_reason']}"
    text = headline + "\n" + _lines(pairs, data["warnings"])
    if with_sensitivity:
        text += "\n\nsensitivity of breakeven utilization (low -> high input):\n"
        width = max(len(r["input"]) for r in data["sensitivity"])
        for row in data["sensitivity"]:
            low = _share_text(row["breakeven_low"], row["breakeven_low_bound"])
            high = _share_text(row["breakeven_high"], row["breakeven_high_bound"])
            if low == "-" or high == "-":
                continue
            swing = "" if row["swing"] is None else f"  swing {row['swing']:.1%}"
            text += f"  {row['input'].ljust(width)}  {low:>7} -> {high:>7}{swing}\n"
        text = text.rstrip("\n")
    return text


# compare --------------------------------------------------------------------------------------

COMPARE_COLUMNS = ["gpu", "count", "provider", "category", "ownership", "wall_hours", "cost",
                   "price_per_gpu_hour", "instance_type", "instances", "region"]


@click.command()
@workload_options
@_api_options
@click.option("--gpu", "gpu_names", multiple=True,
              help="Only these GPU models (repeatable). Default: every GPU with prices.")
@click.option("--provider", "providers", multiple=True, help="Only these providers.")
@click.option("--category", "categories", multiple=True, type=click.Choice(CATEGORIES),
              help="Only these pricing categories (default: all).")
@click.option("--region", "regions", multiple=True, help="Only these regions.")
@click.option("--as-of", type=Instant(end_of_day=True), help="Prices valid at this date.")
@click.option("--currency", help="Currency (default: [economics] currency, USD); stored "
              "prices in other currencies are converted at their day's ECB rate.")
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
            currency: str | None, max_gpus: int, limit: int | None, allow_unclustered: bool,
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
    from tracker.money import check_currency

    workload, spec = workload_request(options)
    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    if max_gpus < 1:
        raise InvalidInput(f"--max-gpus must be at least 1, got {max_gpus}")
    if wants_serving(workload) and workload.get("tokens") is None:
        wanted = resolve_gpus(gpu_names, app) or None
        if workload.get("model") is None and workload.get("params") is None and \
                workload.get("layers") is None:
            raise InvalidInput("give --model (or --params) to compare serving costs")
        found, skipped, offer_rows = pricing.serving_deployments(
            app.db, workload=workload, spec=spec, settings=settings, max_gpus=max_gpus,
            as_of=as_of, currency=currency, gpus=wanted, providers=list(providers),
            regions=list(regions), categories=list(categories),
            api_price_per_million_input=api_price_per_million_input,
            api_price_per_million_output=api_price_per_million_output,
            owned_utilization=owned_utilization)
        for note_text in skipped:
            app.note(f"skipped {note_text}")
        ranked = serving_compare_rows(found, skipped=skipped,
                                      priced_gpus=[r.gpu for r in offer_rows],
                                      max_gpus=max_gpus, as_of=as_of, limit=limit)
        emit(ranked, fmt, SERVING_COMPARE_COLUMNS if fmt != "json" else None)
        return
    if (workload.get("model") is None and workload.get("params") is None) or \
            workload.get("tokens") is None:
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
    for note_text in skipped:
        app.note(f"skipped {note_text}")
    from tracker.answers.candidates import group_absent

    for note_text in group_absent(absent):
        app.note(f"no multi-instance options (plans stay within one instance) for "
                 f"{note_text}")
    table = None
    if fmt == "table":
        from tracker.commands.printing import render_table
        from tracker.economics.owned import owned_notes

        table = "\n".join([render_table(rows, COMPARE_COLUMNS), *owned_notes(rows)])
    emit(rows, fmt, COMPARE_COLUMNS if fmt != "json" else None, table_text=table)
