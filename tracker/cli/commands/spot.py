"""`gpu-tracker spot`: spot with checkpoints vs on-demand (the click layer).

Parses the flags, looks prices and interruption bands up in the store only when they are not
given (`tracker.answers.pricing`), builds the answer with `tracker.answers.documents` and
prints it with the shared formatter; the human table is drawn here. With given prices it
starts without SQLAlchemy, pandas or numpy.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import click

from tracker.answers.documents import SpotDocument, node_mtti, spot_document
from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import (
    as_of_option,
    economics_currency_options,
    one_provider,
    provider_option,
    region_option,
)
from tracker.cli.commands.params import (
    HOURS,
    MINUTES,
    MONEY,
    MTTI_HOURS,
    NODES,
    NON_NEGATIVE_COUNT,
    OPEN_FRACTION,
    POSITIVE_HOURS,
    POSITIVE_MINUTES,
    REPLICAS,
    SECONDS,
    WHOLE_GPUS,
    Instant,
    resolve_gpus,
)
from tracker.cli.commands.printing import emit, field_lines, format_option, money_text
from tracker.core.errors import InvalidInput
from tracker.economics import defaults as econ_defaults
from tracker.economics.units import positive


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
@provider_option(": store prices, and with --instance the one provider whose notice window "
                 "and defaults apply (default: the provider whose instance families or stored "
                 "offers name --instance)")
@click.option("--instance", help="Instance type, for store prices and the interruption band.")
@click.option("--gpu", help="GPU of the plan: consider every stored spot or bid offer whose "
                            "instances can make up --count GPUs (any instance size).")
@click.option("--count", "plan_gpus", type=WHOLE_GPUS, default=None,
              help="GPUs in the plan, with --gpu (default 8).")
@region_option(": store prices, and with --instance the one region of its interruption band")
@as_of_option("Prices, bands and exchange rates valid")
@click.option("--spot-price", type=MONEY, help="Spot price per instance-hour.")
@click.option("--on-demand-price", type=MONEY, help="On-demand price per instance-hour.")
@economics_currency_options("--spot-price, --on-demand-price")
@click.option("--notice-window", is_flag=True,
              help="Take an emergency checkpoint inside the provider's notice window.")
@click.option("--notice-seconds", type=SECONDS,
              help="Notice window length (default: AWS 120, GCP 30, Azure 30).")
@click.option("--emergency-checkpoint-minutes", type=MINUTES,
              help="Time of the emergency checkpoint (default: --checkpoint-minutes).")
@click.option("--unbilled-wait-minutes", type=MINUTES, default=0.0, show_default=True,
              help="Part of each restart spent waiting for capacity, not billed.")
@click.option("--interval-minutes", type=POSITIVE_MINUTES,
              help="Use this checkpoint interval instead of Daly's optimum.")
@click.option("--on-demand-mtti-hours", type=MTTI_HOURS,
              help="Checkpoint on on-demand too, with this node MTTI (default: no checkpoints).")
@click.option("--max-runtime-hours", type=POSITIVE_HOURS,
              help="Forced stop after this long (a checkpoint and a restart each time).")
@click.option("--legacy-preemptible", is_flag=True,
              help="GCP legacy preemptible VM: forced stop every 24 h (Spot VMs have none).")
@click.option("--deadline-hours", type=POSITIVE_HOURS, help="Deadline D (hours).")
@click.option("--simulate", "replicas", type=REPLICAS, default=None,
              help="Monte Carlo: N replicas of the run, reporting P10/P50/P90 of wall time "
                   "and cost and the chance of meeting --deadline-hours.")
@click.option("--seed", type=NON_NEGATIVE_COUNT, default=0, show_default=True,
              help="Random seed of --simulate (same seed, same answer).")
@click.option("--price-path", type=click.Choice(["flat", "history"]), default="flat",
              show_default=True,
              help="--simulate: the offer's price throughout (flat), or its stored price "
                   "history from --start (history).")
@click.option("--start", type=Instant(), default=None,
              help="--price-path history: when the run starts (a past date, UTC); also the "
                   "date the offer is priced at unless --as-of says otherwise.")
@click.option("--min-probability", type=OPEN_FRACTION, default=None,
              help="--simulate with --deadline-hours: the cheapest of spot, on-demand and "
                   "spot with an on-demand fallback that meets the deadline this often.")
@format_option
@pass_app
def spot(app: AppContext, work_hours: float, mtti_hours: float | None,
         checkpoint_minutes: float, restart_minutes: float, nodes: int,
         providers: tuple[str, ...], instance: str | None, gpu: str | None,
         plan_gpus: int | None, regions: tuple[str, ...], as_of: datetime | None,
         spot_price: Decimal | None, on_demand_price: Decimal | None, currency: str | None,
         price_currency: str | None,
         notice_window: bool, notice_seconds: float | None,
         emergency_checkpoint_minutes: float | None, unbilled_wait_minutes: float,
         interval_minutes: float | None, on_demand_mtti_hours: float | None,
         max_runtime_hours: float | None, legacy_preemptible: bool,
         deadline_hours: float | None, replicas: int | None, seed: int, price_path: str,
         start: datetime | None, min_probability: float | None, fmt: str) -> None:
    """Spot with checkpoints vs on-demand: Daly's interval, expected time, cost, deadline.

    Prices per instance-hour are given (--spot-price, --on-demand-price) or looked up for
    --instance in --region (its provider: the one whose instance families or stored offers
    name it, unless --provider says) as of --as-of. With --gpu and --count, every
    stored spot or bid offer of any instance size that can make up the plan is planned and
    the best kept (--on-demand-price is then per GPU-hour).
    """
    from tracker.cli.commands.currencies import economics_currencies
    from tracker.economics.spot import SpotInputs

    money = economics_currencies(app, currency, price_currency, as_of=as_of or start, given={
        "--spot-price": spot_price, "--on-demand-price": on_demand_price})
    settings, currency = money.settings, money.display
    spot_price, on_demand_price = money.given(spot_price), money.given(on_demand_price)
    _check_durations(
        ((work_hours, "--work-hours"), (checkpoint_minutes, "--checkpoint-minutes"),
         (restart_minutes, "--restart-minutes"), (unbilled_wait_minutes, "--unbilled-wait-minutes"),
         (emergency_checkpoint_minutes, "--emergency-checkpoint-minutes"),
         (notice_seconds, "--notice-seconds")),
        ((mtti_hours, "--mtti-hours"), (deadline_hours, "--deadline-hours"),
         (interval_minutes, "--interval-minutes"),
         (on_demand_mtti_hours, "--on-demand-mtti-hours"),
         (max_runtime_hours, "--max-runtime-hours")))
    if nodes < 1:
        raise InvalidInput(f"--nodes must be at least 1, got {nodes}")
    _check_simulation_flags(replicas, price_path, start, min_probability, deadline_hours)
    if start is not None and as_of is None:
        as_of = start
    if legacy_preemptible and max_runtime_hours is None:
        max_runtime_hours = settings.max_runtime_hours("gcp-preemptible")
    if gpu is not None and (instance or spot_price is not None):
        raise InvalidInput("give --gpu (with --count) or --instance / --spot-price, not both")
    if gpu is not None or instance:
        from tracker.store.known import check_filters

        check_filters(app.db, providers, regions)  # store prices: they must be in the store
    if gpu is not None:
        answer = _spot_for_plan(
            app, settings, gpu=gpu, count=8 if plan_gpus is None else plan_gpus,
            work_hours=work_hours,
            mtti_hours=mtti_hours, checkpoint_minutes=checkpoint_minutes,
            restart_minutes=restart_minutes, providers=providers, regions=regions, as_of=as_of,
            currency=currency, on_demand_price=on_demand_price, notice_window=notice_window,
            notice_seconds=notice_seconds, unbilled_wait_minutes=unbilled_wait_minutes,
            emergency_checkpoint_minutes=emergency_checkpoint_minutes,
            interval_minutes=interval_minutes, on_demand_mtti_hours=on_demand_mtti_hours,
            max_runtime_hours=max_runtime_hours, deadline_hours=deadline_hours)
        _simulate(app, answer, replicas, seed, price_path, start, min_probability, currency)
        answer.data["warnings"].extend(money.notes)
        emit(answer.data, fmt, table_text=_spot_table(answer.data))
        return
    # One instance type is one provider's, in one region (its band and its prices).
    provider = one_provider(providers, "with --instance or without --gpu")
    region = _one_region(regions)
    if instance and not provider:
        from tracker.answers import pricing

        provider = pricing.instance_provider(app.db, instance, region, as_of)

    bands: dict[tuple[str, str, str], Any] = {}
    if mtti_hours is None and instance and region:
        from tracker.answers import pricing

        bands = pricing.interruption_bands(app.db, as_of, provider=provider, region=region,
                                           instance_type=instance)
    mtti, mtti_source = node_mtti(settings, bands, provider=provider, region=region,
                                  instance_type=instance, given=mtti_hours)
    spot_row, od_row = _stored_prices(app, instance, provider, region, as_of, currency,
                                      spot=spot_price is None, on_demand=on_demand_price is None)

    notice_hours = _notice_hours(settings, provider, notice_seconds) if notice_window else None
    answer = spot_document(SpotInputs(
        work_hours=work_hours, mtti_node_hours=mtti, checkpoint_hours=checkpoint_minutes / 60,
        restart_hours=restart_minutes / 60, nodes=nodes,
        spot_price_per_node_hour=spot_row.price_per_hour if spot_row else spot_price,
        on_demand_price_per_node_hour=od_row.price_per_hour if od_row else on_demand_price,
        deadline_hours=deadline_hours, unbilled_wait_hours=unbilled_wait_minutes / 60,
        notice_window_hours=notice_hours,
        emergency_checkpoint_hours=None if emergency_checkpoint_minutes is None
        else emergency_checkpoint_minutes / 60,
        on_demand_mtti_node_hours=on_demand_mtti_hours, max_runtime_hours=max_runtime_hours,
        interval_hours=None if interval_minutes is None else interval_minutes / 60,
    ), mtti_source=mtti_source, currency=currency, spot_offer=spot_row, on_demand_offer=od_row)
    _simulate(app, answer, replicas, seed, price_path, start, min_probability, currency)
    answer.data["warnings"].extend(money.notes)
    emit(answer.data, fmt, table_text=_spot_table(answer.data))


def _stored_prices(app: AppContext, instance: str | None, provider: str | None,
                   region: str | None, as_of: datetime | None, currency: str, *, spot: bool,
                   on_demand: bool) -> tuple[Any, Any]:
    """(spot row, on-demand row): the stored offers of --instance for the prices not given
    (None for a given one, and without --instance)."""
    if not instance:
        return None, None
    from tracker.answers import pricing

    assert provider is not None  # found for every --instance

    def stored(category: str) -> Any:
        return pricing.instance_price(app.db, provider=provider, region=region,
                                      instance=instance, category=category, as_of=as_of,
                                      currency=currency)

    return (stored("spot") if spot else None, stored("on-demand") if on_demand else None)


def _one_region(regions: tuple[str, ...]) -> str | None:
    if len(regions) > 1:
        raise click.UsageError(f"--region: give one region with --instance or without --gpu, "
                               f"got {', '.join(regions)}")
    return regions[0] if regions else None


def _check_simulation_flags(replicas: int | None, price_path: str, start: datetime | None,
                            min_probability: float | None, deadline_hours: float | None
                            ) -> None:
    """The --simulate family's flags make sense together, or one usage line."""
    if replicas is None:
        for given, flag in ((price_path != "flat", "--price-path history"),
                            (min_probability is not None, "--min-probability")):
            if given:
                raise click.UsageError(f"{flag} needs --simulate N")
    if price_path == "history" and start is None:
        raise click.UsageError("--price-path history needs --start DATE (when the run starts)")
    if start is not None and price_path != "history":
        raise click.UsageError("--start goes with --price-path history")
    if min_probability is not None and deadline_hours is None:
        raise click.UsageError("--min-probability needs --deadline-hours")


def _simulate(app: AppContext, answer: SpotDocument, replicas: int | None, seed: int,
              price_path: str, start: datetime | None, min_probability: float | None,
              currency: str) -> None:
    """Add the `simulation` object to the answer when --simulate asks for it."""
    if replicas is None:
        return
    from tracker.answers.spot_ranges import history_price_path, simulation_document

    path = warnings = None
    if price_path == "history":
        offer = answer.data.get("spot_offer")
        if offer is None:
            raise click.UsageError("--price-path history needs a stored spot offer "
                                   "(--instance and --region, or --gpu), not --spot-price")
        assert start is not None  # _check_simulation_flags
        path, warnings = history_price_path(app.db, offer, start=start, currency=currency)
    answer.data["simulation"] = simulation_document(
        answer, replicas=replicas, seed=seed, min_probability=min_probability,
        price_path=path, path_warnings=warnings)


def _check_durations(may_be_zero: tuple[tuple[float | None, str], ...],
                     must_be_positive: tuple[tuple[float | None, str], ...]) -> None:
    """Each given (value, flag) is at least 0, or more than 0; one error naming the flag."""
    for value, what in may_be_zero:
        if value is not None:
            positive(value, what, allow_zero=True)
    for value, what in must_be_positive:
        if value is not None:
            positive(value, what)


def _notice_hours(settings: econ_defaults.EconomicsSettings, provider: str | None,
                  notice_seconds: float | None) -> float:
    """The notice window in hours: --notice-seconds, else the provider's known notice."""
    seconds = notice_seconds if notice_seconds is not None else settings.notice_seconds(provider)
    if seconds is None:
        known = ", ".join(settings.notice_providers())
        raise InvalidInput(f"--notice-window needs --notice-seconds or --provider with a "
                           f"known notice ({known})")
    return seconds / 3600.0


def _spot_for_plan(app: AppContext, settings: econ_defaults.EconomicsSettings, *, gpu: str,
                   count: int, work_hours: float, mtti_hours: float | None,
                   checkpoint_minutes: float, restart_minutes: float,
                   providers: tuple[str, ...], regions: tuple[str, ...],
                   as_of: datetime | None, currency: str,
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
        mtti_hours=mtti_hours, as_of=as_of, provider=list(providers) or None,
        region=list(regions) or None, currency=currency,
        on_demand_price_per_gpu_hour=on_demand_price,
        notice_window=notice_window, notice_seconds=notice_seconds)


def _spot_table(data: dict) -> str:
    """The human table, drawn from the JSON document alone (the same figures, rounded)."""
    currency = data["currency"]
    reason = data["not_viable_reason"]
    # A plan that is not viable always names its reason (tracker.economics.spot).
    head = [reason] if reason is not None else []
    pairs = [
        ("work", f"{data['work_hours']:g} h on {data['nodes']} node(s)"),
        ("MTTI", f"{data['mtti_hours']:,.4g} h per node, {data['mtti_job_hours']:,.4g} h per "
                 f"job ({data['mtti_source']})"),
    ]
    if data["expected_wall_hours"] is not None:  # None: interruptions leave no time to work
        pairs += [
            ("checkpoint interval", f"{data['checkpoint_interval_hours'] * 60:,.4g} min "
                                    f"(Daly); Young {data['young_interval_hours'] * 60:,.4g} "
                                    "min"),
            ("expected wall time", f"{data['expected_wall_hours']:,.4g} h "
                                   f"(+{data['overhead_fraction']:.1%} overhead)"),
            ("expected interruptions", f"{data['expected_interruptions']:,.3g}"),
        ]
    if data["spot_cost"] is not None:
        pairs.append(("spot cost", money_text(data["spot_cost"], currency)))
    if data["on_demand_cost"] is not None:
        pairs.append(("on-demand cost", money_text(data["on_demand_cost"], currency)))
    if data["savings_fraction"] is not None:
        pairs.append(("savings", f"{data['savings_fraction']:.1%}"))
    if data["deadline_hours"] is not None:
        pairs.append(("meets deadline", "yes" if data["meets_deadline"] else "no"))
    if data["mixed_cost"] is not None:
        pairs.append(("spot + on-demand", money_text(data["mixed_cost"], currency)))
    offer = data.get("spot_offer")
    if offer is not None:
        where = f" {offer['region']}" if offer["region"] else ""
        shape = f"{data['nodes']} x {offer['instance_type']}{where} ({offer['category']})"
        if "plan_gpus" in data:
            shape += (f", {data['gpus']} GPUs for a {data['plan_gpus']}-GPU plan, best of "
                      f"{data['offers_considered']} offers")
        pairs.append(("spot offer", f"{offer['provider']} {shape}"))
    if data.get("on_demand_comparator"):
        pairs.append(("on-demand comparator", data["on_demand_comparator"]))
    warnings = [w for w in data["warnings"] if w != reason]
    simulation = data.get("simulation")
    if simulation is not None:
        pairs += _simulation_pairs(simulation, currency)
        warnings += simulation["warnings"]
    return "\n".join([*head, field_lines(pairs, warnings)])


def _simulation_pairs(sim: dict, currency: str) -> list[tuple[str, str]]:
    wall, cost = sim["wall_hours"], sim["cost"]
    pairs = [("simulated runs", f"{sim['replicas']:,} (seed {sim['seed']}, price "
                                f"{sim['price_path']})"),
             ("wall time P10/P50/P90", f"{wall['p10']:,.4g} / {wall['p50']:,.4g} / "
                                       f"{wall['p90']:,.4g} h (mean {wall['mean']:,.5g} "
                                       f"± {wall['stderr']:.2g})")]
    if cost is not None:
        pairs.append(("spot cost P10/P50/P90", " / ".join(
            money_text(Decimal(cost[k]), currency) for k in ("p10", "p50", "p90"))
            + f" (mean {money_text(Decimal(cost['mean']), currency)} ± "
              f"{money_text(Decimal(cost['stderr']), currency)})"))
    pairs.append(("mean vs Daly", f"{sim['mean_vs_daly_pct']:+.2f}%"))
    if sim["deadline_probability"] is not None:
        pairs.append(("P(meets deadline)", f"{sim['deadline_probability']:.1%} on spot, "
                      f"{sim['on_demand_deadline_probability']:.0%} on on-demand"))
    choice = sim.get("choice")
    if choice is not None:
        pairs.append(("deadline choice", choice["reason"] + (
            f"; expected {money_text(Decimal(choice['expected_cost']), currency)}"
            if choice["expected_cost"] is not None else "")))
    return pairs
