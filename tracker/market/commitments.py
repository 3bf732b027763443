"""`plan commitments`: how many GPUs to commit from real usage, and the plan's back-test.

Usage comes from a file (a FOCUS cost-and-usage export, or a CSV of GPU-hours per hour or per
day by GPU class and region) or from the FOCUS lines already imported (`import focus-usage`);
it becomes one hourly series of GPUs in use per (GPU, region, provider) over a common window
of whole UTC days. Prices come from the store: the current (as of `as_of`) cheapest whole-GPU
on-demand, spot and reserved offer of each line for the plan, and the day-by-day stored
prices for the back-test. The engine (tracker/economics/commitments.py) does the rest.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput, usage_error
from tracker.core.money import round_money
from tracker.economics.commitments import (
    HORIZONS,
    DayPrices,
    LinePlan,
    LinePrices,
    backtest_line,
    monthly,
    plan_line,
)

if TYPE_CHECKING:
    from tracker.store.db import Database
    from tracker.store.queries import HistoryPoint, PriceRow

COMMITTED = ("reserved-1y", "reserved-3y")
PLAN_COLUMNS = ["gpu", "region", "provider", "commit_gpus", "term",
                "committed_price_per_gpu_hour", "on_demand_price_per_gpu_hour",
                "on_demand_gpu_hours", "spot_gpu_hours", "expected_monthly_cost",
                "all_on_demand_monthly_cost", "break_even_utilization", "currency"]
METHOD = ("commit the k-th GPU of a line when the share of hours it would be busy is at least "
          "committed price / uncommitted price (newsvendor critical fractile: Arrow, Harris & "
          "Marschak 1951; for reserved instances Wang, Liang & Li, ICAC 2013); docs/economics.md "
          "§1.6")
MAX_ERRORS_SHOWN = 1

LineKey = tuple[str, str, str]  # (gpu, region, provider; "" = any provider)


@dataclass
class Usage:
    """Hourly GPUs in use per line over one window of whole UTC days."""

    start: datetime
    series: dict[LineKey, list[float]]
    source: str

    @property
    def hours(self) -> int:
        return len(next(iter(self.series.values()))) if self.series else 0

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.hours)

    def days(self, key: LineKey) -> list[tuple[date, list[float]]]:
        values = self.series[key]
        return [((self.start + timedelta(days=i)).date(), values[i * 24:(i + 1) * 24])
                for i in range(len(values) // 24)]


# --------------------------------------------------------------------------------------------
# Usage in

def _bad(where: str, errors: list[str]) -> InvalidInput:
    more = f" (and {len(errors) - 1} more bad line(s))" if len(errors) > 1 else ""
    return InvalidInput(f"{where}: {errors[0]}{more}; nothing planned")


def _gpu_id(name: str, cache: dict[str, str]) -> str:
    if name not in cache:
        from tracker.core.gpus import resolve_gpu

        cache[name] = resolve_gpu(name).gpu.id
    return cache[name]


def buckets_from_csv(text: str, *, where: str = "usage") -> dict[LineKey, dict[datetime, float]]:
    """GPU-hours per hour per line from a plain usage CSV.

    Columns: `gpu`, `region`, `gpu_hours`, and `hour` (an ISO instant: GPU-hours used in
    that hour) or `day` (an ISO date: GPU-hours that day, spread evenly over its 24 hours);
    `provider` is optional (empty: the plan picks the provider). Every bad line is found
    before anything is planned; the message names the first."""
    from tracker.core.errors import NotFound
    from tracker.core.serialization import parse_instant

    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = set(reader.fieldnames or ())
    missing = {"gpu", "region", "gpu_hours"} - header
    if missing or not ({"hour", "day"} & header):
        need = sorted(missing) + ([] if {"hour", "day"} & header else ["hour or day"])
        raise InvalidInput(f"{where}: not a usage CSV (missing column(s) {', '.join(need)}; "
                           "give gpu,region,gpu_hours and hour or day, or a FOCUS export)")
    errors: list[str] = []
    names: dict[str, str] = {}
    out: dict[LineKey, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    instants: dict[str, datetime] = {}
    for number, raw in enumerate(reader, start=2):
        row = {k: (v or "").strip() for k, v in raw.items() if k}
        try:
            gpu = _gpu_id(row.get("gpu", ""), names)
        except NotFound as exc:
            errors.append(f"line {number}: {exc}")
            continue
        text_hours = row.get("gpu_hours", "")
        try:
            hours = float(text_hours)
        except ValueError:
            errors.append(f"line {number}: gpu_hours {text_hours!r} is not a number")
            continue
        if not hours >= 0 or hours == float("inf"):
            errors.append(f"line {number}: gpu_hours must be 0 or more, got {text_hours}")
            continue
        stamp = row.get("hour") or row.get("day") or ""
        try:
            when = instants.get(stamp) or parse_instant(stamp)
        except (InvalidInput, ValueError):
            errors.append(f"line {number}: {'hour' if row.get('hour') else 'day'} "
                          f"{stamp!r} is not an ISO date or time")
            continue
        instants[stamp] = when
        key = (gpu, row.get("region", ""), row.get("provider", "").lower())
        if row.get("hour"):
            out[key][when.replace(minute=0, second=0, microsecond=0)] += hours
        else:
            day = datetime.combine(when.date(), datetime.min.time(), tzinfo=UTC)
            for h in range(24):
                out[key][day + timedelta(hours=h)] += hours / 24
    if errors:
        raise _bad(where, errors)
    if not out:
        raise InvalidInput(f"{where}: no usage rows; nothing planned")
    return out


def buckets_from_focus_lines(lines: Iterable[Any]) -> dict[LineKey, dict[datetime, float]]:
    """GPU-hours per hour per line from FOCUS usage lines, each spread evenly over the whole
    hours of its charge period."""
    out: dict[LineKey, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        start = line.charge_period_start.replace(minute=0, second=0, microsecond=0)
        end = line.charge_period_end
        span = max(1, int(-(-(end - start).total_seconds() // 3600)))
        per_hour = line.usage_hours * line.gpu_count / span
        key = (line.gpu_id, line.region, line.provider)
        for h in range(span):
            out[key][start + timedelta(hours=h)] += per_hour
    return out


def usage_from_file(db: Database, text: str, *, where: str = "usage") -> Usage:
    """A FOCUS export (by its columns) or a plain usage CSV, as hourly series."""
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    if "ChargePeriodStart" in first:
        from tracker.market.focus import known_offers, parse_usage

        lines, errors, _skipped = parse_usage(text, known_offers(db))
        if errors:
            raise _bad(where, [str(e) for e in errors])
        if not lines:
            raise InvalidInput(f"{where}: no GPU usage lines; nothing planned")
        return to_usage(buckets_from_focus_lines(lines), f"FOCUS export {where}")
    return to_usage(buckets_from_csv(text, where=where), f"usage CSV {where}")


def usage_from_store(db: Database, *, since: datetime | None = None,
                     until: datetime | None = None) -> Usage | None:
    """The imported FOCUS usage lines as hourly series; None when none are imported."""
    from tracker.market.focus import usage_lines

    lines = usage_lines(db, since=since, until=until)
    if not lines:
        return None
    return to_usage(buckets_from_focus_lines(lines), "imported FOCUS usage")


WORKLOAD_DAYS = 28  # four whole weeks: a weekly schedule repeats a whole number of times


def usage_from_workload(db: Database, workloads: Sequence[Mapping[str, Any]], name: str, *,
                        as_of: datetime, settings: Any, currency: str = "USD"
                        ) -> tuple[Usage, Any]:
    """A report workload (`[[report.workloads]]`) on its schedule as usage: the report's
    recommendation as of `as_of` (its GPU, count, provider and region: the cheapest on-demand
    way to run it) held for `runs_per_month` runs of its wall time (a job) or for
    `hours_per_month` hours online (a service), over the `WORKLOAD_DAYS` whole UTC days that
    end on `as_of`'s day. Returns the usage and the parsed workload."""
    import difflib

    from tracker.answers.recommend import evaluate_workload
    from tracker.answers.workloads import Workload
    from tracker.core.errors import NotFound
    from tracker.economics.commitments import scheduled_usage
    from tracker.store.queries import price_rows

    names = [str(w.get("name", "")) for w in workloads]
    if name not in names:
        close = difflib.get_close_matches(name, names, n=2, cutoff=0.4)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else \
            f"; known: {', '.join(repr(n) for n in names) or 'none'}"
        raise usage_error(f"--workload: no [[report.workloads]] entry named {name!r}{hint}")
    workload = Workload.parse(workloads[names.index(name)])
    hours_per_month = float(settings.value("hours_per_month"))
    if not workload.serving and workload.runs_per_month <= 0:
        raise InvalidInput(f"workload {name!r} has no schedule: set runs_per_month above 0 "
                           "(or hours_per_month for a serve workload)")
    rows = [r for r in price_rows(db, as_of=as_of, category="on-demand")
            if r.currency == currency]
    try:
        found = evaluate_workload(workload, rows, settings, {}, best_only=True)
    except NotFound as exc:
        raise InvalidInput(f"workload {name!r}: {exc}") from None
    best = found.get("best")
    if best is None:
        raise InvalidInput(f"workload {name!r}: {found.get('note') or 'no priced option'} "
                           f"as of {as_of.date()}; nothing planned")
    window = WORKLOAD_DAYS * 24
    # A service is billed for whole instances it holds (billed_gpus), a job for its GPUs.
    count = math.ceil(float(best.get("billed_gpus") or best["count"]))
    if workload.serving:
        series = scheduled_usage(window, count, online_hours_per_month=workload.hours_per_month,
                                 hours_per_month=hours_per_month)
        shape = f"online {workload.hours_per_month:g} h a month"
    else:
        series = scheduled_usage(window, count, run_hours=float(best["wall_hours"]),
                                 runs_per_month=workload.runs_per_month,
                                 hours_per_month=hours_per_month)
        shape = (f"{workload.runs_per_month:g} runs a month of {best['wall_hours']:g} h")
    start = datetime.combine(as_of.astimezone(UTC).date() - timedelta(days=WORKLOAD_DAYS - 1),
                             datetime.min.time(), tzinfo=UTC)
    key = (best["gpu"], best["region"], best["provider"])
    source = (f"workload {name!r}: {count}x {best['gpu']} at {best['provider']} "
              f"{best['region']}, {shape}")
    return Usage(start, {key: series}, source), workload


def to_usage(buckets: Mapping[LineKey, Mapping[datetime, float]], source: str) -> Usage:
    """Hourly series over one common window: from the first usage day's 00:00 UTC to the end
    of the last usage day (hours without usage are 0)."""
    instants = [t for b in buckets.values() for t in b]
    first = min(instants)
    last = max(instants)
    start = datetime.combine(first.date(), datetime.min.time(), tzinfo=UTC)
    days = (last.date() - first.date()).days + 1
    hours = days * 24
    series: dict[LineKey, list[float]] = {}
    for key, values in sorted(buckets.items()):
        row = [0.0] * hours
        for when, value in values.items():
            row[int((when - start).total_seconds() // 3600)] += value
        series[key] = row
    return Usage(start, series, source)


# --------------------------------------------------------------------------------------------
# Prices

def _whole(rows: Iterable[PriceRow]) -> list[PriceRow]:
    return [r for r in rows if float(r.gpu_count) >= 1]


def _cheapest(rows: Iterable[PriceRow]) -> PriceRow | None:
    return min(rows, key=lambda r: (r.price_per_gpu_hour, r.provider, r.instance_type),
               default=None)


@dataclass(frozen=True)
class PricedLine:
    provider: str
    prices: LinePrices
    offers: dict[str, PriceRow]  # category -> the offer priced


def spot_overhead(checkpoint_hours: float, restart_hours: float, mtti_hours: float) -> float:
    """The spot engine's expected wall time per hour of work, minus one (Daly's complete
    model at Daly's optimum interval; docs/economics.md §1.2)."""
    from tracker.economics.spot import daly_interval, expected_wall_hours

    interval = daly_interval(checkpoint_hours, mtti_hours)
    return expected_wall_hours(1.0, interval, checkpoint_hours, restart_hours,
                               mtti_hours) - 1.0


def price_lines(rows: Sequence[PriceRow], key: LineKey,
                overhead_for: Any) -> list[PricedLine]:
    """Every provider that can price the line (an on-demand offer of the GPU in the region),
    with its cheapest whole-GPU on-demand, spot and committed prices."""
    gpu, region, provider = key
    mine = [r for r in _whole(rows) if r.gpu == gpu and r.region == region
            and (not provider or r.provider == provider)]
    providers = sorted({r.provider for r in mine if r.category == "on-demand"})
    out = []
    for name in providers:
        offers: dict[str, PriceRow] = {}
        for category in ("on-demand", "spot", *COMMITTED):
            best = _cheapest(r for r in mine if r.provider == name and r.category == category)
            if best is not None:
                offers[category] = best
        spot = offers.get("spot")
        out.append(PricedLine(name, LinePrices(
            on_demand=offers["on-demand"].price_per_gpu_hour,
            committed={c: offers[c].price_per_gpu_hour for c in COMMITTED if c in offers},
            spot=spot.price_per_gpu_hour if spot else None,
            spot_overhead=overhead_for(name) if spot else 0.0), offers))
    return out


def _cheapest_each_day(spans: Sequence[HistoryPoint], instants: Sequence[datetime]
                       ) -> list[Decimal | None]:
    """The cheapest price per GPU-hour in effect at each instant (ascending), in one sweep."""
    ordered = sorted(spans, key=lambda s: s.valid_from)
    out: list[Decimal | None] = []
    active: list[HistoryPoint] = []
    i = 0
    for when in instants:
        while i < len(ordered) and ordered[i].valid_from <= when:
            active.append(ordered[i])
            i += 1
        active = [s for s in active if s.valid_to is None or s.valid_to > when]
        out.append(min(s.price_per_gpu_hour for s in active) if active else None)
    return out


def day_prices(spans: Sequence[HistoryPoint], days: Sequence[date],
               term: str | None) -> list[DayPrices]:
    """Per day, the cheapest whole-GPU price per GPU-hour of each category among the spans
    in effect at the day's 00:00 UTC."""
    by_category: dict[str, list[HistoryPoint]] = defaultdict(list)
    for s in spans:
        if float(s.gpu_count) >= 1:
            by_category[s.category].append(s)
    instants = [datetime.combine(day, datetime.min.time(), tzinfo=UTC) for day in days]
    none: list[Decimal | None] = [None] * len(days)
    od = _cheapest_each_day(by_category.get("on-demand", []), instants)
    spot = _cheapest_each_day(by_category.get("spot", []), instants)
    committed = _cheapest_each_day(by_category.get(term, []), instants) if term else none
    return [DayPrices(day, a, b, c) for day, a, b, c in zip(days, od, spot, committed,
                                                             strict=True)]


# --------------------------------------------------------------------------------------------
# The plan

def _money(value: Decimal | None) -> Decimal | None:
    return None if value is None else round_money(value)


def _rate(value: Decimal | None) -> Decimal | None:
    return None if value is None else value.quantize(Decimal("0.0001"))


def _check_plan_inputs(usage: Usage, horizon_months: int, interruptible_share: float,
                       backtest_months: int, *, spot_engine_inputs: bool) -> None:
    """One line for the first plan input out of range (`spot_engine_inputs`: the checkpoint
    and restart times that price a spot share are given)."""
    if horizon_months not in HORIZONS:
        raise InvalidInput(f"--horizon-months must be 12 or 36, got {horizon_months}")
    if not 0 <= interruptible_share <= 1:
        raise InvalidInput(f"--interruptible-share must be in [0, 1], got "
                           f"{interruptible_share:g}")
    if backtest_months < 0:
        raise InvalidInput(f"--backtest-months must be 0 or more, got {backtest_months}")
    if interruptible_share > 0 and not spot_engine_inputs:
        raise usage_error("--interruptible-share needs --checkpoint-minutes and "
                          "--restart-minutes (the spot engine prices the overhead)")
    if not usage.series or usage.hours == 0:
        raise InvalidInput("no usage to plan")


def _line_json(key: LineKey, priced: PricedLine, plan: LinePlan, scale: float,
               monthly_costs: tuple[Decimal, Decimal, Decimal | None],
               currency: str) -> dict[str, Any]:
    """One line of the plan document; `scale` turns the usage window's GPU-hours into a
    month's, `monthly_costs` are the plan's, all on-demand and all spot a month."""
    cost_m, od_m, spot_m = monthly_costs
    offer = priced.offers.get(plan.term or "")
    return {
        "gpu": key[0], "region": key[1], "provider": priced.provider,
        "commit_gpus": plan.commit_gpus, "term": plan.term,
        "committed_price_per_gpu_hour": _rate(plan.committed_price),
        "committed_offer": offer.instance_type if offer else None,
        "commitment_kind": (offer.attributes.get("commitment_kind") if offer else None),
        "on_demand_price_per_gpu_hour": _rate(priced.prices.on_demand),
        "spot_price_per_gpu_hour": _rate(priced.prices.spot),
        "spot_overhead": round(priced.prices.spot_overhead, 4),
        "gpu_hours_per_month": round(plan.total_gpu_hours * scale, 2),
        "committed_gpu_hours": round(plan.committed_gpu_hours * scale, 2),
        "on_demand_gpu_hours": round(plan.on_demand_gpu_hours * scale, 2),
        "spot_gpu_hours": round(plan.spot_gpu_hours * scale, 2),
        "expected_monthly_cost": _money(cost_m),
        "all_on_demand_monthly_cost": _money(od_m),
        "all_spot_monthly_cost": _money(spot_m),
        "break_even_utilization": None if plan.break_even_utilization is None
        else round(plan.break_even_utilization, 4),
        "committed_utilization": None if plan.committed_utilization is None
        else round(plan.committed_utilization, 4),
        "currency": currency, "warnings": list(plan.warnings),
    }


def commitment_plan(
    db: Database, usage: Usage, *, horizon_months: int, as_of: datetime,
    interruptible_share: float = 0.0, checkpoint_hours: float | None = None,
    restart_hours: float | None = None, mtti_for: Any = None, currency: str = "USD",
    hours_per_month: Decimal = Decimal(730), backtest_months: int = 0,
) -> dict[str, Any]:
    """The commitment plan document for the usage: per line, the committed GPUs and term,
    what stays on-demand and goes to spot, the monthly cost against all on-demand and all
    spot, and the back-test over the stored prices of the usage's days (and the
    `backtest_months` months before, the usage's days replayed in order)."""
    from tracker.store.queries import price_rows

    _check_plan_inputs(usage, horizon_months, interruptible_share, backtest_months,
                       spot_engine_inputs=checkpoint_hours is not None
                       and restart_hours is not None)
    gpus = sorted({k[0] for k in usage.series})
    rows = [r for r in price_rows(db, as_of=as_of, gpu=gpus) if r.currency == currency]
    overheads: dict[str, float] = {}

    def overhead_for(provider: str) -> float:
        if interruptible_share <= 0 or checkpoint_hours is None or restart_hours is None:
            return 0.0
        if provider not in overheads:
            mtti = mtti_for(provider) if mtti_for is not None else 24.0
            overheads[provider] = spot_overhead(checkpoint_hours, restart_hours, mtti)
        return overheads[provider]

    warnings: list[str] = []
    planned: list[tuple[LineKey, PricedLine, LinePlan]] = []
    for key, series in usage.series.items():
        candidates = price_lines(rows, key, overhead_for)
        if not candidates:
            gpu, region, provider = key
            who = f"{provider} " if provider else ""
            warnings.append(f"{gpu} in {region or 'no region'}: no {who}on-demand price in "
                            f"{currency} as of {as_of.date()}; line left out")
            continue
        best = min(((c, plan_line(series, c.prices, horizon_months=horizon_months,
                                  interruptible_share=interruptible_share))
                    for c in candidates), key=lambda cp: (cp[1].cost, cp[0].provider))
        planned.append((key, best[0], best[1]))
    if not planned:
        raise InvalidInput("no line of the usage has a stored on-demand price: "
                           + "; ".join(warnings))
    window = usage.hours
    lines_out: list[dict[str, Any]] = []
    plan_total = od_total = Decimal(0)
    spot_total: Decimal | None = Decimal(0)
    for key, priced, plan in planned:
        scale = float(hours_per_month) / window
        cost_m = monthly(plan.cost, window, hours_per_month)
        od_m = monthly(plan.all_on_demand_cost, window, hours_per_month)
        spot_m = monthly(plan.all_spot_cost, window, hours_per_month) \
            if plan.all_spot_cost is not None else None
        plan_total += cost_m
        od_total += od_m
        spot_total = spot_total + spot_m if spot_total is not None and spot_m is not None \
            else None
        lines_out.append(_line_json(key, priced, plan, scale, (cost_m, od_m, spot_m), currency))
    saving = (float((od_total - plan_total) / od_total * 100) if od_total else None)
    backtest = _backtest(db, usage, planned, interruptible_share=interruptible_share,
                         backtest_months=backtest_months, currency=currency)
    warnings.extend(backtest.pop("_warnings"))
    return {
        "horizon_months": horizon_months, "interruptible_share": interruptible_share,
        "currency": currency, "as_of": as_of, "method": METHOD,
        "usage": {"source": usage.source, "start": usage.start, "end": usage.end,
                  "hours": window, "lines": len(usage.series)},
        "hours_per_month": hours_per_month,
        "lines": lines_out,
        "totals": {"plan": _money(plan_total), "all_on_demand": _money(od_total),
                   "all_spot": _money(spot_total),
                   "saving_pct": None if saving is None else round(saving, 1)},
        "backtest": backtest,
        "warnings": warnings,
    }


def _months(days: Iterable[date]) -> list[str]:
    return sorted({d.strftime("%Y-%m") for d in days})


def _shift_months(day: date, months: int) -> date:
    year, month = divmod(day.month - 1 - months, 12)
    return date(day.year + year, month + 1, 1)


def _backtest(db: Database, usage: Usage, planned: Sequence[tuple[LineKey, PricedLine,
                                                                     LinePlan]], *,
              interruptible_share: float, backtest_months: int, currency: str
              ) -> dict[str, Any]:
    from tracker.store.queries import history

    first = usage.start.date()
    since_day = _shift_months(first, backtest_months) if backtest_months else first
    gpus = sorted({k[0] for k, _p, _l in planned})
    spans = [s for s in history(db, gpus, since=datetime.combine(since_day, datetime.min.time(),
                                                                  tzinfo=UTC),
                                until=usage.end) if s.currency == currency]
    grouped: dict[tuple[str, str, str], list[HistoryPoint]] = defaultdict(list)
    for s in spans:
        grouped[(s.gpu, s.region, s.provider)].append(s)
    days_out: list[dict[str, Any]] = []
    plan_sum = od_sum = Decimal(0)
    spot_sum: Decimal | None = Decimal(0)
    unpriced = 0
    all_days: set[date] = set()
    for key, priced, plan in planned:
        own = usage.days(key)
        # The months before replay the usage's own days in order, cycling.
        before = (first - since_day).days
        replay = [(since_day + timedelta(days=i), own[i % len(own)][1]) for i in range(before)]
        daily = replay + own
        prices = day_prices(grouped.get((key[0], key[1], priced.provider), []),
                            [d for d, _ in daily], plan.term)
        result = backtest_line(daily, plan.commit_gpus, prices,
                               interruptible_share=interruptible_share
                               if priced.prices.spot is not None else 0.0,
                               spot_overhead=priced.prices.spot_overhead)
        unpriced += len(result.unpriced_days)
        plan_sum += result.plan_cost
        od_sum += result.all_on_demand_cost
        spot_sum = spot_sum + result.all_spot_cost \
            if spot_sum is not None and result.all_spot_cost is not None else None
        for d in result.days:
            all_days.add(d.day)
            days_out.append({
                "date": d.day, "gpu": key[0], "region": key[1], "provider": priced.provider,
                "gpu_hours": round(d.gpu_hours, 4),
                "on_demand_price_per_gpu_hour": d.prices.on_demand,
                "spot_price_per_gpu_hour": d.prices.spot,
                "committed_price_per_gpu_hour": result.committed_price
                if plan.commit_gpus else None,
                "plan_cost": _money(d.plan), "all_on_demand_cost": _money(d.all_on_demand),
                "all_spot_cost": _money(d.all_spot)})
    warnings = []
    if unpriced:
        warnings.append(f"back-test: {unpriced} line-day(s) without a stored price were left "
                        "out of every total alike")
    return {
        "months": _months(all_days), "since": since_day,
        "until": (usage.end - timedelta(days=1)).date(),
        "plan_cost": _money(plan_sum), "all_on_demand_cost": _money(od_sum),
        "all_spot_cost": _money(spot_sum),
        "saving_pct": round(float((od_sum - plan_sum) / od_sum * 100), 1) if od_sum else None,
        "unpriced_line_days": unpriced, "days": days_out, "_warnings": warnings,
    }


def plan_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The plan's lines as table/CSV rows."""
    return [{c: line.get(c) for c in PLAN_COLUMNS} for line in document["lines"]]


__all__ = ["PLAN_COLUMNS", "Usage", "buckets_from_csv", "commitment_plan", "plan_rows",
           "spot_overhead", "to_usage", "usage_from_file", "usage_from_store",
           "usage_from_workload"]
