"""Economics commands: cost, compare, spot, breakeven.

Each answer carries its arithmetic inputs: the price used (and the offer it came from, as of
a date), the defaults applied and their sources. Money is Decimal from the store or the flags
to the output; computed amounts are rounded to the cent (per-hour rates to 0.0001) only
when printed. The store and the sizing engine are imported inside the commands that need
them, so `breakeven` with given prices starts without SQLAlchemy, pandas or numpy.
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal
from typing import Any

import click

from tracker.commands import AppContext, pass_app
from tracker.commands.params import Instant
from tracker.economics import defaults as econ_defaults
from tracker.economics.units import CENT, RATE_PLACES, money_out, ratio_out, sig
from tracker.errors import InvalidInput, NotFound
from tracker.output import emit, format_option

econ_defaults.register()

CATEGORIES = ("on-demand", "spot", "reserved-1y", "reserved-3y", "bid", "quote")


class DecimalValue(click.ParamType):
    """An exact decimal (money, rates): parsed without float; bad input is one line."""

    name = "DECIMAL"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Decimal:
        from tracker.money import to_decimal

        label = f"--{param.name.replace('_', '-')}" if param is not None and param.name else "value"
        return to_decimal(value, what=label)


class FloatValue(click.ParamType):
    """A finite float (hours, counts); bad input is one line."""

    name = "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        label = f"--{param.name.replace('_', '-')}" if param is not None and param.name else "value"
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidInput(f"{label} must be a number, got {value!r}") from None
        if not math.isfinite(number):
            raise InvalidInput(f"{label} must be a finite number, got {value!r}")
        return number


DECIMAL = DecimalValue()
NUMBER = FloatValue()


def _settings(app: AppContext) -> econ_defaults.EconomicsSettings:
    econ_defaults.register()
    return econ_defaults.EconomicsSettings.from_config(app.config)


def _nonnegative(value: float | None, what: str) -> None:
    if value is not None and value < 0:
        raise InvalidInput(f"{what} must be 0 or more, got {value:g}")


def _positive(value: float | None, what: str) -> None:
    if value is not None and value <= 0:
        raise InvalidInput(f"{what} must be more than 0, got {value:g}")


def _money_text(amount: Decimal | None, currency: str, places: Decimal = CENT) -> str:
    if amount is None:
        return "-"
    digits = max(0, -places.as_tuple().exponent)
    return f"{money_out(amount, places):,.{digits}f} {currency}"


def _lines(pairs: list[tuple[str, str]], warnings: list[str] | tuple[str, ...] = ()) -> str:
    width = max(len(label) for label, _ in pairs)
    out = [f"{label.ljust(width)}  {value}" for label, value in pairs]
    out.extend(f"warning: {w}" for w in warnings)
    return "\n".join(out)


def _when(as_of: datetime | None) -> str:
    if as_of is None:
        return "now"
    from tracker.output import iso_utc

    return iso_utc(as_of)


# Store lookups --------------------------------------------------------------------------------

def _resolve_gpu(app: AppContext, name: str) -> str:
    from tracker.gpus import resolve_gpu

    resolved = resolve_gpu(name)
    for warning in resolved.warnings:
        app.note(f"warning: {warning}")
    return resolved.gpu.id


def _describe_gpu_prices(rows: list[Any], limit: int = 8) -> str:
    groups: dict[tuple[str, str], set[float]] = {}
    for row in rows:
        groups.setdefault((row.provider, row.category), set()).add(float(row.gpu_count))
    parts = []
    for (provider, category), counts in sorted(groups.items())[:limit]:
        sizes = ", ".join(f"{c:g}" for c in sorted(counts))
        parts.append(f"{provider} {category} ({sizes} GPUs)")
    more = f" and {len(groups) - limit} more" if len(groups) > limit else ""
    return "; ".join(parts) + more


def _no_price(
    db: Any, *, as_of: datetime | None, gpu: str, count: float, provider: str | None,
    region: str | None, category: str | None, currency: str,
) -> NotFound:
    """One line: what was asked for, and what the store does have instead."""
    from tracker.store import price_rows

    wanted = " ".join(x for x in (category or "any-category", "price for",
                                  f"{count:g}x {gpu}") if x)
    if provider:
        wanted += f" from {provider}"
    if region:
        wanted += f" in {region}"
    wanted += f" as of {_when(as_of)}"
    same_gpu = price_rows(db, as_of=as_of, gpu=gpu, currency=currency)
    if same_gpu:
        return NotFound(f"no {wanted}; {gpu} prices exist for: {_describe_gpu_prices(same_gpu)}")
    others = sorted({r.gpu for r in price_rows(db, as_of=as_of, currency=currency)})
    if others:
        shown = ", ".join(others[:12]) + (" ..." if len(others) > 12 else "")
        return NotFound(f"no {wanted}; GPUs with {currency} prices: {shown}")
    return NotFound(f"no {wanted}; the store has no {currency} prices then "
                    "(run `gpu-tracker refresh`)")


def _priced_offer(
    app: AppContext, *, gpu: str, count: float, as_of: datetime | None, provider: str | None,
    region: str | None, category: str | None, currency: str,
) -> tuple[Any, int]:
    """The cheapest stored offer whose instances tile `count` GPUs: (row, instances)."""
    from tracker.economics.cost import tiling_offer
    from tracker.store import price_rows

    rows = price_rows(app.db, as_of=as_of, gpu=gpu, provider=provider, region=region,
                      category=category, currency=currency)
    chosen = tiling_offer(rows, count)
    if chosen is None:
        raise _no_price(app.db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                        region=region, category=category, currency=currency)
    return chosen


def _check_fits(result: Any, count: float, gpu_id: str) -> None:
    if result.fits is False:
        need = f"at least {result.gpus_needed}" if result.gpus_needed else "more"
        raise InvalidInput(f"the job does not fit on {count:g} x {gpu_id}: it needs {need} "
                           "GPUs (see `gpu-tracker size`); raise --count")
    if result.wall_hours is None:
        why = f" ({result.reason})" if result.reason else ""
        raise InvalidInput(f"the sizing engine gave no run time for this job{why}; "
                           "pass --hours")


def _cheapest_sized_offer(
    app: AppContext, *, gpu: str, count: float, workload: dict[str, Any],
    as_of: datetime | None, provider: str | None, region: str | None, category: str | None,
    currency: str,
) -> tuple[Any, int, Any]:
    """The stored offer with the cheapest run on `count` GPUs: (row, instances, sizing)."""
    from tracker.options import priced_options
    from tracker.store import price_rows

    rows = price_rows(app.db, as_of=as_of, gpu=gpu, provider=provider, region=region,
                      category=category, currency=currency)
    fields = {k: v for k, v in workload.items() if v is not None}
    options, skipped = priced_options(rows, fields, billing=_settings(app).billing,
                                      max_gpus=int(count), gpu_counts=[_whole_count(count)])
    if options:
        best = options[0]
        return best.offer, best.instances, best.sized
    if skipped:
        raise InvalidInput(f"cannot size this job: {skipped[0]}")
    if rows:  # offers exist, but the job fits none of their node shapes
        _check_fits(_size(gpu, count, workload), count, gpu)
    raise _no_price(app.db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                    region=region, category=category, currency=currency)


def _offer_json(row: Any | None) -> dict[str, Any] | None:
    if row is None:
        return None
    data = row.to_json()
    data["offer_id"] = row.offer_id
    return data


# cost -----------------------------------------------------------------------------------------

COST_KEYS = ("flops", "wall_hours", "gpu_hours", "price_per_gpu_hour", "currency", "cost",
             "offer")


class ParamCount(click.ParamType):
    """A parameter count: 7e9, 7000000000, or with a suffix 7B / 70b / 1.5T / 350M."""

    name = "COUNT"
    _SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        text = str(value).strip().lower()
        factor = self._SUFFIX.get(text[-1:], 1.0)
        number = text[:-1] if factor != 1.0 else text
        try:
            result = float(number) * factor
        except ValueError:
            raise InvalidInput(f"--params must be a parameter count like 7e9 or 7B, got "
                               f"{value!r}") from None
        if not math.isfinite(result) or result <= 0:
            raise InvalidInput(f"--params must be a positive parameter count, got {value!r}")
        return result


WORKLOAD_FIELDS = ("model", "params", "workload", "tokens", "precision", "mfu", "seq_len",
                   "micro_batch", "sharding", "offload", "optimizer", "recompute",
                   "gpus_per_node")


def _sizing_options(func: Any) -> Any:
    """Workload flags passed to the sizing engine (see `gpu-tracker size --help`)."""
    options = [
        click.option("--model", help="Model preset (e.g. llama-3.1-8b) for the sizing engine."),
        click.option("--params", type=ParamCount(),
                     help="Parameter count (7e9 or 7B), the rough path instead of --model."),
        click.option("--workload", type=click.Choice(
            ["inference", "pretrain", "full-finetune", "lora", "qlora"]), default="pretrain",
            show_default=True, help="Workload type."),
        click.option("--tokens", type=NUMBER, help="Training tokens D."),
        click.option("--precision", help="Weight precision (sizing default bf16)."),
        click.option("--mfu", type=NUMBER, help="Measured end-to-end MFU (0-1)."),
        click.option("--seq-len", "seq_len", type=int, help="Sequence length."),
        click.option("--micro-batch", "micro_batch", type=int, help="Micro-batch size."),
        click.option("--sharding", help="none|zero1|zero2|zero3|fsdp."),
        click.option("--offload", help="none|optimizer|all."),
        click.option("--optimizer", help="adamw|adamw-bf16|adam-8bit|sgd."),
        click.option("--recompute", help="none|selective|full."),
        click.option("--gpus-per-node", "gpus_per_node", type=int, help="GPUs per node (8)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _whole_count(count: float) -> int:
    if count != int(count):
        raise InvalidInput(f"the sizing engine needs a whole GPU count, got {count:g}; "
                           "pass --hours for fractional GPUs")
    return int(count)


def _size(gpu: str, count: float, workload: dict[str, Any]) -> Any:
    """Run the sizing engine for `count` GPUs; returns its SizingResult."""
    from tracker.sizing import SizingRequest, size_workload

    fields = {k: v for k, v in workload.items() if v is not None}
    return size_workload(SizingRequest(gpu=gpu, count=_whole_count(count), **fields))


@click.command()
@_sizing_options
@click.option("--hours", type=NUMBER, help="Wall hours of one run on --count GPUs (skips sizing).")
@click.option("--gpu", help="GPU model, e.g. h100 (needed for sizing and store prices).")
@click.option("--count", type=NUMBER, default=1.0, show_default=True, help="GPUs in the run.")
@click.option("--price-per-gpu-hour", type=DECIMAL, help="Given price (else the store's).")
@click.option("--provider", help="Store price: only this provider.")
@click.option("--region", help="Store price: only this region.")
@click.option("--category", type=click.Choice(CATEGORIES), default="on-demand",
              show_default=True, help="Store price: pricing category.")
@click.option("--as-of", type=Instant(end_of_day=True),
              help="Store price valid at this date (UTC; a bare date = end of day). Default: now.")
@click.option("--currency", help="Currency of the price (default: [economics] currency, USD).")
@click.option("--billing-seconds", type=int,
              help="Billing granularity in seconds (default: per provider, else 1).")
@click.option("--billing-minimum-seconds", type=int, help="Minimum billed seconds per run.")
@click.option("--success-rate", type=DECIMAL, help="Probability p that one attempt succeeds.")
@click.option("--fail-fraction", type=DECIMAL,
              help="Share of a run a failed attempt uses before it is caught (default 1).")
@click.option("--experiments", type=int, help="K experiments, for time to result.")
@click.option("--parallel", type=int, default=1, show_default=True,
              help="P parallel slots, for time to result.")
@click.option("--slot-utilization", type=DECIMAL,
              help="Share of the day a slot runs back to back (default 1), for runs per day.")
@format_option
@pass_app
def cost(app: AppContext, hours: float | None, gpu: str | None, count: float,
         price_per_gpu_hour: Decimal | None, provider: str | None, region: str | None,
         category: str, as_of: datetime | None, currency: str | None,
         billing_seconds: int | None, billing_minimum_seconds: int | None,
         success_rate: Decimal | None, fail_fraction: Decimal | None, experiments: int | None,
         parallel: int, slot_utilization: Decimal | None, fmt: str,
         **workload: Any) -> None:
    """Cost of one run (and per successful experiment) on N GPUs.

    Wall time comes from the sizing engine (--model/--params, --tokens, --gpu, --count) or
    from --hours. The price is --price-per-gpu-hour, or the cheapest stored offer for the GPU
    and count as of --as-of (filter with --provider, --region, --category).
    """
    from tracker.economics import cost as engine
    from tracker.money import check_currency

    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    _positive(count, "--count")
    _positive(hours, "--hours")
    gpu_id = _resolve_gpu(app, gpu) if gpu else None
    warnings: list[str] = []

    flops = None
    offer = None
    instances = None
    if hours is None and (gpu_id is None or (
            workload["model"] is None and workload["params"] is None)
            or workload["tokens"] is None):
        raise InvalidInput(
            "give --hours, or --model (or --params), --tokens and --gpu for the sizing "
            "engine to estimate the run time")
    if hours is not None:
        wall_hours = hours
    else:
        _positive(workload["tokens"], "--tokens")
    if price_per_gpu_hour is None:
        if gpu_id is None:
            raise InvalidInput("give --price-per-gpu-hour, or --gpu to price from the store")
        if hours is None:
            # The offer decides the node: eight 1-GPU instances talk over the network, one
            # 8-GPU instance over NVLink, so each instance size is sized and priced apart.
            offer, instances, result = _cheapest_sized_offer(
                app, gpu=gpu_id, count=count, workload=workload, as_of=as_of,
                provider=provider, region=region, category=category, currency=currency)
        else:
            offer, instances = _priced_offer(
                app, gpu=gpu_id, count=count, as_of=as_of, provider=provider, region=region,
                category=category, currency=currency)
        price = offer.price_per_gpu_hour
        rule, billing_source = settings.billing(offer.provider)
    else:
        price = price_per_gpu_hour
        rule, billing_source = settings.billing(provider)
        if hours is None:
            result = _size(gpu_id, count, workload)
    if hours is None:
        _check_fits(result, count, gpu_id)
        warnings.extend(result.warnings or ())
        wall_hours = float(result.wall_hours)
        flops = result.flops

    if billing_seconds is not None or billing_minimum_seconds is not None:
        rule = engine.BillingRule(
            billing_seconds if billing_seconds is not None else rule.granularity_seconds,
            billing_minimum_seconds if billing_minimum_seconds is not None
            else rule.minimum_seconds)
        billing_source = "flag"

    run = engine.run_cost(price, count, wall_hours, rule)
    data: dict[str, Any] = {
        "flops": sig(flops) if flops is not None else None,
        "wall_hours": sig(run.wall_hours),
        "gpu_hours": sig(run.gpu_hours),
        "price_per_gpu_hour": price,
        "currency": currency,
        "cost": money_out(run.cost),
        "offer": _offer_json(offer),
        "gpu": gpu_id,
        "count": int(count) if count == int(count) else count,
        "instances": instances,
        "billed_hours": sig(float(run.billed_hours), 9),
        "billing_seconds": rule.granularity_seconds,
        "billing_minimum_seconds": rule.minimum_seconds,
        "billing_source": billing_source,
    }
    slot_u = slot_utilization if slot_utilization is not None else settings.value(
        "slot_utilization")
    data["runs_per_day"] = engine.runs_per_day(wall_hours, slot_u)
    if success_rate is not None:
        fail = fail_fraction if fail_fraction is not None else settings.value("fail_fraction")
        data["cost_per_success"] = money_out(engine.cost_per_success(run.cost, success_rate, fail))
        data["expected_attempts"] = ratio_out(engine.expected_attempts(success_rate))
    elif fail_fraction is not None:
        raise InvalidInput("--fail-fraction needs --success-rate")
    if experiments is not None:
        data["time_to_result_hours"] = sig(
            engine.time_to_result_hours(experiments, parallel, wall_hours))
    data["warnings"] = warnings

    pairs = [
        ("GPU", f"{count:g} x {gpu_id or '(given price)'}"),
        ("wall time", f"{run.wall_hours:,.4g} h ({run.gpu_hours:,.4g} GPU-h)"),
        ("price", f"{_money_text(price, currency, RATE_PLACES)} per GPU-hour"),
        ("billing", f"{rule.granularity_seconds} s increments, minimum "
                    f"{rule.minimum_seconds} s; billed {float(run.billed_hours):,.6g} h"),
        ("cost per run", _money_text(run.cost, currency)),
    ]
    if flops is not None:
        pairs.insert(1, ("FLOPs", f"{flops:.4g}"))
    if offer is not None:
        pairs.append(("offer", f"{offer.provider} {offer.instance_type} {offer.region} "
                               f"{offer.category} x{instances}, seen {_when(offer.observed_at)}"))
    if "cost_per_success" in data:
        pairs.append(("cost per success", _money_text(data["cost_per_success"], currency)))
    pairs.append(("runs per day", str(data["runs_per_day"])))
    if "time_to_result_hours" in data:
        pairs.append(("time to result", f"{data['time_to_result_hours']:,.4g} h for "
                                        f"{experiments} on {parallel} slot(s)"))
    emit(data, fmt, table_text=_lines(pairs, warnings))


# spot -----------------------------------------------------------------------------------------

SPOT_KEYS = ("checkpoint_interval_hours", "young_interval_hours", "expected_wall_hours",
             "expected_interruptions", "overhead_fraction", "spot_cost", "on_demand_cost",
             "savings_fraction", "meets_deadline")


def _band_mtti(app: AppContext, settings: econ_defaults.EconomicsSettings, *, provider: str,
               region: str, instance: str, as_of: datetime | None) -> tuple[float, str] | None:
    from tracker.economics.spot import band_probability, mtti_from_probability
    from tracker.store import interruption_facts

    facts = interruption_facts(app.db, provider=provider, region=region, instance_type=instance,
                               as_of=as_of)
    if not facts:
        return None
    fact = next((f for f in facts if f.os.lower() == "linux"), facts[0])
    conversion, window, point, open_top = settings.band_settings()
    share = band_probability(fact.min_pct, fact.max_pct, point, open_top)
    mtti = mtti_from_probability(share, conversion, window)
    source = (f"{provider} interruption band '{fact.band_label}' for {instance} in {region} "
              f"(as of {_when(fact.as_of)}): {share:.1%} per {window:g} h as a {conversion}")
    return mtti, source


def _instance_price(app: AppContext, *, provider: str, region: str | None, instance: str,
                    category: str, as_of: datetime | None, currency: str) -> Any:
    from tracker.store import price_rows

    rows = [r for r in price_rows(app.db, as_of=as_of, provider=provider, region=region,
                                  category=category, currency=currency)
            if r.instance_type == instance]
    if rows:
        return rows[0]
    listed = price_rows(app.db, as_of=as_of, provider=provider, region=region,
                        currency=currency)
    same = sorted({r.category for r in listed if r.instance_type == instance})
    where = f"{provider} {region}" if region else provider
    if same:
        raise NotFound(f"no {category} price for {instance} in {where} as of {_when(as_of)}; "
                       f"it has: {', '.join(same)}")
    types = sorted({r.instance_type for r in listed if r.category == category})
    if types:
        shown = ", ".join(types[:10]) + (" ..." if len(types) > 10 else "")
        raise NotFound(f"no {category} price for {instance} in {where} as of {_when(as_of)}; "
                       f"{category} prices exist for: {shown}")
    raise NotFound(f"no {category} prices from {where} as of {_when(as_of)} "
                   "(run `gpu-tracker refresh`)")


@click.command()
@click.option("--work-hours", type=NUMBER, required=True,
              help="Failure-free compute time Ts of the job (hours).")
@click.option("--mtti-hours", type=NUMBER,
              help="Mean time to interruption of ONE node (hours). Default: the stored Spot "
                   "Advisor band for --instance/--region, else the provider default.")
@click.option("--checkpoint-minutes", type=NUMBER, required=True,
              help="Time δ to write one checkpoint (minutes).")
@click.option("--restart-minutes", type=NUMBER, required=True,
              help="Time R to get going again after an interruption (minutes).")
@click.option("--nodes", type=int, default=1, show_default=True,
              help="Instances in the job (M_job = M_node / nodes).")
@click.option("--provider", help="Provider (aws, gcp, azure, ...): notice window, defaults, "
                                 "store prices.")
@click.option("--instance", help="Instance type, for store prices and the interruption band.")
@click.option("--region", help="Region, for store prices and the interruption band.")
@click.option("--as-of", type=Instant(end_of_day=True),
              help="Prices and bands valid at this date (UTC). Default: now.")
@click.option("--spot-price", type=DECIMAL, help="Spot price per instance-hour.")
@click.option("--on-demand-price", type=DECIMAL, help="On-demand price per instance-hour.")
@click.option("--currency", help="Currency (default: [economics] currency, USD).")
@click.option("--notice-window", is_flag=True,
              help="Take an emergency checkpoint inside the provider's notice window.")
@click.option("--notice-seconds", type=NUMBER,
              help="Notice window length (default: AWS 120, GCP 30, Azure 30).")
@click.option("--emergency-checkpoint-minutes", type=NUMBER,
              help="Time of the emergency checkpoint (default: --checkpoint-minutes).")
@click.option("--unbilled-wait-minutes", type=NUMBER, default=0.0, show_default=True,
              help="Part of each restart spent waiting for capacity, not billed.")
@click.option("--interval-minutes", type=NUMBER,
              help="Use this checkpoint interval instead of Daly's optimum.")
@click.option("--on-demand-mtti-hours", type=NUMBER,
              help="Checkpoint on on-demand too, with this node MTTI (default: no checkpoints).")
@click.option("--max-runtime-hours", type=NUMBER,
              help="Forced stop after this long (a checkpoint and a restart each time).")
@click.option("--legacy-preemptible", is_flag=True,
              help="GCP legacy preemptible VM: forced stop every 24 h (Spot VMs have none).")
@click.option("--deadline-hours", type=NUMBER, help="Deadline D (hours).")
@format_option
@pass_app
def spot(app: AppContext, work_hours: float, mtti_hours: float | None,
         checkpoint_minutes: float, restart_minutes: float, nodes: int, provider: str | None,
         instance: str | None, region: str | None, as_of: datetime | None,
         spot_price: Decimal | None, on_demand_price: Decimal | None, currency: str | None,
         notice_window: bool, notice_seconds: float | None,
         emergency_checkpoint_minutes: float | None, unbilled_wait_minutes: float,
         interval_minutes: float | None, on_demand_mtti_hours: float | None,
         max_runtime_hours: float | None, legacy_preemptible: bool,
         deadline_hours: float | None, fmt: str) -> None:
    """Spot with checkpoints vs on-demand: Daly's interval, expected time, cost, deadline.

    Prices per instance-hour are given (--spot-price, --on-demand-price) or looked up for
    --instance in --region (default provider aws) as of --as-of.
    """
    from tracker.economics.spot import SpotInputs, plan_spot
    from tracker.money import check_currency

    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    for value, what in ((work_hours, "--work-hours"), (checkpoint_minutes, "--checkpoint-minutes"),
                        (restart_minutes, "--restart-minutes"),
                        (unbilled_wait_minutes, "--unbilled-wait-minutes"),
                        (emergency_checkpoint_minutes, "--emergency-checkpoint-minutes"),
                        (notice_seconds, "--notice-seconds")):
        _nonnegative(value, what)
    for value, what in ((mtti_hours, "--mtti-hours"), (deadline_hours, "--deadline-hours"),
                        (interval_minutes, "--interval-minutes"),
                        (on_demand_mtti_hours, "--on-demand-mtti-hours"),
                        (max_runtime_hours, "--max-runtime-hours")):
        _positive(value, what)
    if nodes < 1:
        raise InvalidInput(f"--nodes must be at least 1, got {nodes}")
    if legacy_preemptible and max_runtime_hours is None:
        max_runtime_hours = settings.max_runtime_hours("gcp-preemptible")
    if instance and not provider:
        provider = "aws"
    provider = provider.lower() if provider else None

    if mtti_hours is not None:
        mtti, mtti_source = mtti_hours, "given"
    else:
        found = None
        if instance and region:
            found = _band_mtti(app, settings, provider=provider or "aws", region=region,
                               instance=instance, as_of=as_of)
        mtti, mtti_source = found or settings.default_mtti_hours(provider)

    spot_row = od_row = None
    if instance and (spot_price is None or on_demand_price is None):
        if spot_price is None:
            spot_row = _instance_price(app, provider=provider or "aws", region=region,
                                       instance=instance, category="spot", as_of=as_of,
                                       currency=currency)
            spot_price = spot_row.price_per_hour
        if on_demand_price is None:
            od_row = _instance_price(app, provider=provider or "aws", region=region,
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

    plan = plan_spot(SpotInputs(
        work_hours=work_hours, mtti_node_hours=mtti, checkpoint_hours=checkpoint_minutes / 60,
        restart_hours=restart_minutes / 60, nodes=nodes,
        spot_price_per_node_hour=spot_price, on_demand_price_per_node_hour=on_demand_price,
        deadline_hours=deadline_hours, unbilled_wait_hours=unbilled_wait_minutes / 60,
        notice_window_hours=notice_hours,
        emergency_checkpoint_hours=None if emergency_checkpoint_minutes is None
        else emergency_checkpoint_minutes / 60,
        on_demand_mtti_node_hours=on_demand_mtti_hours, max_runtime_hours=max_runtime_hours,
        interval_hours=None if interval_minutes is None else interval_minutes / 60,
    ))
    data: dict[str, Any] = {
        "checkpoint_interval_hours": sig(plan.checkpoint_interval_hours),
        "young_interval_hours": sig(plan.young_interval_hours),
        "expected_wall_hours": sig(plan.expected_wall_hours),
        "expected_interruptions": sig(plan.expected_interruptions),
        "overhead_fraction": ratio_out(plan.overhead_fraction),
        "spot_cost": money_out(plan.spot_cost),
        "on_demand_cost": money_out(plan.on_demand_cost),
        "savings_fraction": ratio_out(plan.savings_fraction),
        "meets_deadline": plan.meets_deadline,
        "work_hours": work_hours,
        "nodes": nodes,
        "mtti_hours": sig(mtti),
        "mtti_job_hours": sig(plan.mtti_job_hours),
        "mtti_source": mtti_source,
        "billed_spot_hours": sig(plan.billed_spot_hours),
        "on_demand_hours": sig(plan.on_demand_hours),
        "forced_restarts": plan.forced_restarts,
        "notice_window_used": plan.notice_window_used,
        "deadline_hours": deadline_hours,
        "deadline_reachable": plan.deadline_reachable,
        "on_demand_hours_for_deadline": sig(plan.on_demand_hours_for_deadline)
        if plan.on_demand_hours_for_deadline is not None else None,
        "mixed_cost": money_out(plan.mixed_cost),
        "spot_price_per_hour": spot_price,
        "on_demand_price_per_hour": on_demand_price,
        "currency": currency,
        "spot_offer": _offer_json(spot_row),
        "on_demand_offer": _offer_json(od_row),
        "warnings": list(plan.warnings),
    }
    pairs = [
        ("work", f"{work_hours:g} h on {nodes} node(s)"),
        ("MTTI", f"{mtti:,.4g} h per node, {plan.mtti_job_hours:,.4g} h per job ({mtti_source})"),
        ("checkpoint interval", f"{plan.checkpoint_interval_hours * 60:,.4g} min (Daly); "
                                f"Young {plan.young_interval_hours * 60:,.4g} min"),
        ("expected wall time", f"{plan.expected_wall_hours:,.4g} h "
                               f"(+{plan.overhead_fraction:.1%} overhead)"),
        ("expected interruptions", f"{plan.expected_interruptions:,.3g}"),
        ("spot cost", _money_text(plan.spot_cost, currency)),
        ("on-demand cost", _money_text(plan.on_demand_cost, currency)),
        ("savings", "-" if plan.savings_fraction is None else f"{plan.savings_fraction:.1%}"),
    ]
    if deadline_hours is not None:
        pairs.append(("meets deadline", "yes" if plan.meets_deadline else "no"))
    if plan.mixed_cost is not None:
        pairs.append(("spot + on-demand", _money_text(plan.mixed_cost, currency)))
    emit(data, fmt, table_text=_lines(pairs, plan.warnings))


# breakeven ------------------------------------------------------------------------------------

BREAKEVEN_KEYS = ("monthly_onprem_opex", "monthly_cloud_cost", "payback_months",
                  "discounted_payback_month", "breakeven_utilization", "npv", "irr_monthly",
                  "irr_annual", "owned_cost_per_gpu_hour", "sensitivity")


@click.command()
@click.option("--capex", type=DECIMAL,
              help="Hardware cost (servers or GPUs). Default with --gpu: the per-GPU default x "
                   "count, plus networking per GPU.")
@click.option("--networking-per-gpu", type=DECIMAL,
              help="Networking per GPU added to capex (default: only with capex from --gpu).")
@click.option("--storage", type=DECIMAL, default=Decimal(0), help="Storage capex.")
@click.option("--install", type=DECIMAL, default=Decimal(0), help="Installation capex.")
@click.option("--power-kw", type=DECIMAL, help="Rated IT power in kW (default with --gpu).")
@click.option("--power-factor", type=DECIMAL, help="Average share of rated power drawn (1).")
@click.option("--pue", type=DECIMAL, help="Power usage effectiveness (1.3).")
@click.option("--kwh-price", type=DECIMAL, help="Electricity price per kWh (0.08).")
@click.option("--colo-per-kw-month", type=DECIMAL, help="Colocation per kW-month (150).")
@click.option("--staff-per-month", type=DECIMAL,
              help="Staff and maintenance per month (1000 per 8-GPU node).")
@click.option("--other-opex-per-month", type=DECIMAL, help="Other monthly opex (0).")
@click.option("--cloud-price-per-hour", type=DECIMAL,
              help="Cloud price per hour for the same GPUs (else from the store with --gpu).")
@click.option("--gpu", help="GPU model: store price, capex and power defaults.")
@click.option("--count", type=NUMBER, help="GPUs bought and rented (default 8).")
@click.option("--provider", help="Store price: only this provider.")
@click.option("--region", help="Store price: only this region.")
@click.option("--category", type=click.Choice(CATEGORIES), default="on-demand",
              show_default=True, help="Store price: pricing category.")
@click.option("--as-of", type=Instant(end_of_day=True), help="Store price valid at this date.")
@click.option("--currency", help="Currency (default: [economics] currency, USD).")
@click.option("--utilization", type=DECIMAL, required=True,
              help="Share of hours the GPUs would be rented, in (0, 1].")
@click.option("--horizon-months", type=int, help="Months the hardware is kept (36).")
@click.option("--residual-fraction", type=DECIMAL, help="Resale share of capex at the horizon.")
@click.option("--discount-rate", type=DECIMAL, help="Annual discount rate (0.10).")
@click.option("--hours-per-month", type=DECIMAL, help="Hours per month (730; 720 = 30 days).")
@click.option("--depreciation", type=click.Choice(["sl", "ddb", "macrs5"]),
              help="Add a depreciation schedule (straight line, double declining, MACRS 5-yr).")
@click.option("--depreciation-years", type=int,
              help="Book life for sl/ddb (default: the horizon in whole years).")
@format_option
@pass_app
def breakeven(app: AppContext, capex: Decimal | None, networking_per_gpu: Decimal | None,
              storage: Decimal, install: Decimal, power_kw: Decimal | None,
              power_factor: Decimal | None, pue: Decimal | None, kwh_price: Decimal | None,
              colo_per_kw_month: Decimal | None, staff_per_month: Decimal | None,
              other_opex_per_month: Decimal | None, cloud_price_per_hour: Decimal | None,
              gpu: str | None, count: float | None, provider: str | None, region: str | None,
              category: str, as_of: datetime | None, currency: str | None,
              utilization: Decimal, horizon_months: int | None,
              residual_fraction: Decimal | None, discount_rate: Decimal | None,
              hours_per_month: Decimal | None, depreciation: str | None,
              depreciation_years: int | None, fmt: str) -> None:
    """Rent vs buy: monthly costs, payback, NPV and IRR of buying, breakeven utilization.

    Give --capex, --power-kw and --cloud-price-per-hour, or --gpu and --count to take the
    capex and power defaults and the cheapest stored cloud price as of --as-of.
    """
    from tracker.economics import finance
    from tracker.economics.ownership import evaluate, sensitivity
    from tracker.money import check_currency

    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    gpu_id = _resolve_gpu(app, gpu) if gpu else None
    gpus = Decimal(repr(count)) if count is not None else settings.value("gpus_per_node")
    _positive(float(gpus), "--count")
    assumptions: list[dict[str, Any]] = []

    def note(name: str, value: Any, source: str) -> None:
        assumptions.append({"name": name, "value": value, "source": source})

    if capex is None:
        if gpu_id is None:
            raise InvalidInput("give --capex, or --gpu for the per-GPU hardware default")
        per_gpu = settings.capex_per_gpu(gpu_id)
        if per_gpu is None:
            raise InvalidInput(f"no capex default for {gpu_id}; pass --capex (defaults exist "
                               f"for: {', '.join(settings.capex_gpus())})")
        hardware = per_gpu * gpus
        note("capex_per_gpu", per_gpu, settings.capex_source(gpu_id))
        if networking_per_gpu is None:
            networking_per_gpu = settings.value("networking_per_gpu")
            note("networking_per_gpu", networking_per_gpu, settings.source("networking_per_gpu"))
    else:
        hardware = capex
    networking = (networking_per_gpu or Decimal(0)) * gpus
    total_capex = hardware + networking + storage + install

    if power_kw is None:
        per_gpu_kw = settings.power_kw_per_gpu(gpu_id) if gpu_id else None
        if per_gpu_kw is None:
            known = ", ".join(settings.power_gpus())
            raise InvalidInput("give --power-kw (rated IT power), or --gpu with a power "
                               f"default ({known})")
        power_kw = per_gpu_kw * gpus
        note("power_kw", power_kw, settings.power_source(gpu_id or ""))

    offer = None
    if cloud_price_per_hour is None:
        if gpu_id is None:
            raise InvalidInput("give --cloud-price-per-hour, or --gpu to price from the store")
        offer, _instances = _priced_offer(
            app, gpu=gpu_id, count=float(gpus), as_of=as_of, provider=provider, region=region,
            category=category, currency=currency)
        cloud_price_per_hour = offer.price_per_gpu_hour * gpus

    given = {
        "pue": pue, "kwh_price": kwh_price, "colo_per_kw_month": colo_per_kw_month,
        "staff_per_month": staff_per_month, "other_opex_per_month": other_opex_per_month,
        "residual_fraction": residual_fraction, "discount_rate": discount_rate,
        "hours_per_month": hours_per_month, "power_factor": power_factor,
        "horizon_months": horizon_months,
    }
    inputs = settings.ownership_inputs(
        capex=total_capex, power_kw=power_kw, cloud_price_per_hour=cloud_price_per_hour,
        utilization=utilization, gpus=gpus, **given)
    for key, setting in (("pue", "pue"), ("kwh_price", "kwh_price"),
                         ("colo_per_kw_month", "colo_per_kw_month"),
                         ("other_opex_per_month", "other_opex_per_month"),
                         ("residual_fraction", "residual_fraction"),
                         ("discount_rate", "discount_rate"), ("hours_per_month", "hours_per_month"),
                         ("power_factor", "power_factor"), ("horizon_months", "horizon_months")):
        if given[key] is None:
            note(key, getattr(inputs, key), settings.source(setting))
    if staff_per_month is None:
        note("staff_per_month", inputs.staff_per_month,
             f"{settings.value('staff_per_node_month')} per node x "
             f"{settings.nodes_for(gpus)} node(s): {settings.source('staff_per_node_month')}")

    result = evaluate(inputs)
    table = sensitivity(inputs, settings.sensitivity_ranges())
    warnings = list(result.warnings)
    if residual_fraction is None and inputs.horizon_months != 36:
        warnings.append("the residual default (20%) is stated for 36 months; pass "
                        "--residual-fraction for a different horizon")

    data: dict[str, Any] = {
        "monthly_onprem_opex": money_out(result.monthly_onprem_opex),
        "monthly_cloud_cost": money_out(result.monthly_cloud_cost),
        "payback_months": ratio_out(result.payback_months, 4),
        "discounted_payback_month": result.discounted_payback_month,
        "breakeven_utilization": ratio_out(result.breakeven_utilization),
        "npv": money_out(result.npv),
        "irr_monthly": ratio_out(result.irr_monthly, 8),
        "irr_annual": ratio_out(result.irr_annual, 8),
        "owned_cost_per_gpu_hour": money_out(result.owned_cost_per_gpu_hour, RATE_PLACES),
        "sensitivity": [{
            "input": row.input, "base": row.base, "low": row.low, "high": row.high,
            "breakeven_low": ratio_out(row.breakeven_low),
            "breakeven_high": ratio_out(row.breakeven_high),
            "swing": ratio_out(row.swing),
        } for row in table],
        "capex": total_capex,
        "residual_value": money_out(result.residual_value),
        "monthly_power": money_out(result.monthly_power),
        "monthly_colo": money_out(result.monthly_colo),
        "monthly_net_saving": money_out(result.monthly_net_saving),
        "cloud_price_per_hour": cloud_price_per_hour,
        "currency": currency,
        "gpus": int(gpus) if gpus == gpus.to_integral_value() else float(gpus),
        "horizon_months": inputs.horizon_months,
        "offer": _offer_json(offer),
        "assumptions": assumptions,
        "warnings": warnings,
    }
    if depreciation is not None:
        years = depreciation_years or max(1, round(inputs.horizon_months / 12))
        schedule = finance.depreciation_schedule(
            depreciation, total_capex, result.residual_value, years)
        data["depreciation"] = {"method": depreciation, "years": len(schedule),
                                "per_year": [money_out(x) for x in schedule]}

    pairs = [
        ("capex", _money_text(total_capex, currency)),
        ("on-prem opex / month", _money_text(result.monthly_onprem_opex, currency)
         + f" (power {_money_text(result.monthly_power, currency)}, colo "
           f"{_money_text(result.monthly_colo, currency)})"),
        ("cloud / month", _money_text(result.monthly_cloud_cost, currency)
         + f" ({float(inputs.utilization):.0%} of {inputs.hours_per_month} h at "
           f"{_money_text(cloud_price_per_hour, currency, RATE_PLACES)}/h)"),
        ("payback", "never" if result.payback_months is None
         else f"{result.payback_months:.2f} months"),
        ("discounted payback", "never" if result.discounted_payback_month is None
         else f"month {result.discounted_payback_month}"),
        ("breakeven utilization", "-" if result.breakeven_utilization is None
         else f"{result.breakeven_utilization:.1%} over {inputs.horizon_months} months"),
        (f"NPV buy - rent (at {float(inputs.discount_rate):.1%}/yr)",
         _money_text(result.npv, currency)),
        ("IRR", "-" if result.irr_monthly is None
         else f"{result.irr_monthly:.3%}/month, {result.irr_annual:.2%}/year"),
        ("owned cost / GPU-hour", _money_text(result.owned_cost_per_gpu_hour, currency,
                                              RATE_PLACES)),
    ]
    text = _lines(pairs, warnings)
    if fmt == "table":
        text += "\n\nsensitivity of breakeven utilization (low -> high input):\n"
        width = max(len(r.input) for r in table)
        for row in table:
            if row.breakeven_low is None or row.breakeven_high is None:
                continue
            text += (f"  {row.input.ljust(width)}  {row.breakeven_low:7.1%} -> "
                     f"{row.breakeven_high:7.1%}  swing {row.swing:.1%}\n")
        text = text.rstrip("\n")
    emit(data, fmt, table_text=text)


# compare --------------------------------------------------------------------------------------

COMPARE_KEYS = ("gpu", "count", "provider", "category", "wall_hours", "cost")


@click.command()
@_sizing_options
@click.option("--gpu", "gpu_names", multiple=True,
              help="Only these GPU models (repeatable). Default: every GPU with prices.")
@click.option("--provider", "providers", multiple=True, help="Only these providers.")
@click.option("--category", "categories", multiple=True, type=click.Choice(CATEGORIES),
              help="Only these pricing categories (default: all).")
@click.option("--region", "regions", multiple=True, help="Only these regions.")
@click.option("--as-of", type=Instant(end_of_day=True), help="Prices valid at this date.")
@click.option("--currency", help="Currency (default: [economics] currency, USD).")
@click.option("--max-gpus", type=int, default=64, show_default=True,
              help="Largest GPU count to consider.")
@click.option("--limit", type=int, help="At most this many rows.")
@format_option
@pass_app
def compare(app: AppContext, gpu_names: tuple[str, ...], providers: tuple[str, ...],
            categories: tuple[str, ...], regions: tuple[str, ...], as_of: datetime | None,
            currency: str | None, max_gpus: int, limit: int | None, fmt: str,
            **workload: Any) -> None:
    """Every GPU model and count that fits one workload, priced per run and ranked.

    For each GPU with stored prices, counts from the offers' sizes up to --max-gpus that
    fit the job are sized (wall time, each offer's instance as a node) and priced with the
    cheapest run per provider and category.
    """
    from tracker.money import check_currency
    from tracker.options import priced_options
    from tracker.store import price_rows

    settings = _settings(app)
    currency = check_currency(currency) if currency else settings.currency
    if (workload["model"] is None and workload["params"] is None) or workload["tokens"] is None:
        raise InvalidInput("give --model (or --params) and --tokens to compare run costs")
    _positive(workload["tokens"], "--tokens")
    if max_gpus < 1:
        raise InvalidInput(f"--max-gpus must be at least 1, got {max_gpus}")
    wanted = [_resolve_gpu(app, g) for g in gpu_names] or None
    rows = price_rows(app.db, as_of=as_of, gpu=wanted, provider=list(providers) or None,
                      region=list(regions) or None, category=list(categories) or None,
                      currency=currency)
    if not rows:
        raise _no_compare_prices(app, as_of, wanted, currency)
    fields = {k: v for k, v in workload.items() if v is not None}
    options, skipped = priced_options(rows, fields, billing=settings.billing,
                                      max_gpus=max_gpus)
    results: list[dict[str, Any]] = [{
        "gpu": o.gpu, "count": o.count, "provider": o.offer.provider,
        "category": o.offer.category, "wall_hours": sig(o.wall_hours),
        "cost": money_out(o.cost), "gpu_hours": sig(o.run.gpu_hours),
        "price_per_gpu_hour": o.offer.price_per_gpu_hour, "currency": o.offer.currency,
        "instance_type": o.offer.instance_type, "instances": o.instances,
        "region": o.offer.region, "offer_id": o.offer.offer_id,
    } for o in options]
    if not results:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        gpus = ", ".join(sorted({r.gpu for r in rows}))
        raise NotFound(f"no priced GPU count up to {max_gpus} fits this workload as of "
                       f"{_when(as_of)}; GPUs with prices: {gpus}{detail}")
    if limit:
        results = results[:limit]
    for note_text in skipped:
        app.note(f"skipped {note_text}")
    columns = ["gpu", "count", "provider", "category", "wall_hours", "cost", "price_per_gpu_hour",
               "instance_type", "instances", "region"]
    emit(results, fmt, columns if fmt != "json" else None)


def _no_compare_prices(app: AppContext, as_of: datetime | None, wanted: list[str] | None,
                       currency: str) -> NotFound:
    from tracker.store import price_rows

    others = sorted({r.gpu for r in price_rows(app.db, as_of=as_of, currency=currency)})
    asked = f" for {', '.join(wanted)}" if wanted else ""
    if others:
        return NotFound(f"no {currency} prices match{asked} as of {_when(as_of)}; GPUs with "
                        f"prices: {', '.join(others)}")
    return NotFound(f"the store has no {currency} prices as of {_when(as_of)} "
                    "(run `gpu-tracker refresh`)")
