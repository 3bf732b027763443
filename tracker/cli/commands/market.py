"""Market commands: the price index, alerts, FOCUS export and import, the invoice check.

Thin: parse options, call one function of `tracker.market`, print with the shared formatter.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from tracker.answers.freshness import stale_after_hours
from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import (
    as_of_option,
    category_option,
    currency_option,
    provider_option,
    region_option,
)
from tracker.cli.commands.params import (
    POSITIVE_HOURS,
    ROW_LIMIT,
    BoundedInt,
    Instant,
    check_range,
    resolve_gpus,
)
from tracker.cli.commands.printing import emit, format_option, round_for_people

INDEX_COLUMNS = ["date", "gpu", "category", "median", "p10", "p90", "providers", "cheapest",
                 "cheapest_provider", "currency"]
INDEX_CATEGORIES = ("on-demand", "spot", "bid")  # the categories the index follows
JOB_COLUMNS = ["date", "job", "cost", "currency", "basis", "gpu", "count", "provider"]


def _stale_hours(app: AppContext) -> float:
    return stale_after_hours(app.config)


@click.command()
@click.option("--gpu", "gpus", multiple=True, help="GPU class (repeatable), e.g. h100.")
@click.option("--since", type=Instant(), help="First day (UTC). Default: 30 days before --until.")
@click.option("--until", type=Instant(end_of_day=True), help="Last day (UTC). Default: today.")
@category_option(INDEX_CATEGORIES, purpose=": the index series (default: on-demand)")
@click.option("--job", "jobs", multiple=True,
              help="Cost-per-job index of this configured workload ([report] workloads; "
                   "repeatable; `all` for every one) instead of the price index.")
@click.option("--max-age-hours", type=POSITIVE_HOURS,
              help="Leave out prices not seen for this long at the sampling instant. "
                   "Default: [refresh] stale_after_hours.")
@currency_option()
@format_option
@pass_app
def index(app: AppContext, gpus: tuple[str, ...], since: datetime | None,
          until: datetime | None, categories: tuple[str, ...], jobs: tuple[str, ...],
          max_age_hours: float | None, currency: str | None, fmt: str) -> None:
    """Daily GPU price index: median, p10, p90 per GPU-hour over providers (each counted once
    at its cheapest whole-GPU offer), or the cost-per-job index of configured workloads."""
    from tracker.core.errors import InvalidInput
    from tracker.market.index import day_range, job_index, price_index

    check_range(since, until)
    last = (until or datetime.now(UTC)).date()
    first = since.date() if since else last - timedelta(days=30)
    days = day_range(first, last)
    currency = currency or "USD"
    if jobs:
        workloads = app.config.report.workloads
        names = None if "all" in jobs else list(jobs)
        known = [str(w.get("name", "")) for w in workloads]
        missing = [n for n in names or [] if n not in known]
        if missing:
            raise InvalidInput(f"no configured workload named {missing[0]!r} (configured: "
                               f"{'; '.join(known) or 'none'})")
        points = job_index(app.db, workloads, days, currency=currency,
                           economics=app.config.economics_values(), names=names,
                           max_age_hours=max_age_hours or _stale_hours(app))
        emit([p.to_json() for p in points], fmt, JOB_COLUMNS if fmt != "json" else None)
        return
    if not gpus:
        raise InvalidInput("--gpu is required for the price index (or give --job)")
    result = price_index(app.db, resolve_gpus(gpus, app), since=days[0], until=days[-1],
                         currency=currency, categories=list(categories) or ["on-demand"],
                         max_age_hours=max_age_hours or _stale_hours(app))
    for warning in result.warnings:
        app.note(f"warning: {warning}")
    if not result.points and fmt == "table":
        app.note("no index points: no whole-GPU prices seen at least twice and recently enough "
                 "in this period (see --max-age-hours)")
    rows = [p.to_json() for p in result.points]
    if fmt == "table":
        round_for_people(rows, ("median", "p10", "p90", "cheapest"), rate=True)
    if fmt != "json":
        for row in rows:
            row["rates"] = "; ".join(f"{r['from']} {r['rate']} ({r['rate_date']})"
                                     for r in row["rates"])
    columns = INDEX_COLUMNS + (["rates"] if any(p.rates for p in result.points) else [])
    emit(rows, fmt, columns if fmt != "json" else None)


# -- alerts ------------------------------------------------------------------------------------


@click.group()
def alerts() -> None:
    """Market alerts from [[alerts.rules]]: list, history, test a rule, check all."""


@alerts.command("list")
@format_option
@pass_app
def alerts_list(app: AppContext, fmt: str) -> None:
    """The configured rules in words, with their current state."""
    from tracker.market.alert_checks import rule_rows
    from tracker.market.alerts import alert_settings

    settings = alert_settings(app.config)
    if not settings.rules and fmt == "table":
        app.note("no alert rules: add [[alerts.rules]] tables to the config file")
    emit(rule_rows(app.db, settings), fmt)


@alerts.command("history")
@click.option("--rule", help="Only this rule.")
@click.option("--limit", type=ROW_LIMIT, default=50, show_default=True)
@format_option
@pass_app
def alerts_history(app: AppContext, rule: str | None, limit: int, fmt: str) -> None:
    """Recorded firings and clearings, newest first."""
    from tracker.market.alert_checks import alert_history

    emit(alert_history(app.db, rule, limit), fmt, ["at", "rule", "event", "message",
                                                     "delivered"] if fmt != "json" else None)


@alerts.command("test")
@click.argument("rule")
@click.option("--send", is_flag=True, help="Also deliver a [test] notification.")
@format_option
@pass_app
def alerts_test(app: AppContext, rule: str, send: bool, fmt: str) -> None:
    """Evaluate RULE now (its state is not changed); --send delivers a test message."""
    from tracker.market.alert_checks import try_rule

    emit(try_rule(app.db, app.config, rule, datetime.now(UTC), send=send), fmt)


@alerts.command("check")
@format_option
@pass_app
def alerts_check(app: AppContext, fmt: str) -> None:
    """Evaluate every rule and deliver new firings once per channel (for cron; the scheduler
    runs this after every refresh). A channel that failed is retried at later checks with
    backoff; exit 1 while any channel of a current firing is undelivered."""
    import sys

    from tracker.market.alert_checks import check_alerts

    results = check_alerts(app.db, app.config, datetime.now(UTC))
    rows = [r.to_json() for r in results]
    if fmt != "json":
        for row in rows:
            row["delivered"] = "; ".join(row["delivered"])
            row["undelivered"] = ", ".join(row["undelivered"])
    emit(rows, fmt, ["rule", "active", "event", "message", "delivered", "undelivered"]
         if fmt != "json" else None)
    undelivered = [f"{r.rule} ({', '.join(r.undelivered)})" for r in results if r.undelivered]
    if undelivered:
        app.note(f"not delivered yet: {'; '.join(undelivered)}; retried at the next checks")
        sys.exit(1)


# -- FOCUS ------------------------------------------------------------------------------------


@click.group()
def export() -> None:
    """Export tracked data in other formats (FOCUS)."""


@export.command("focus")
@as_of_option()
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Output file: .csv, or .parquet (needs pyarrow).")
@currency_option()
@pass_app
def export_focus(app: AppContext, as_of: datetime | None, out: str,
                 currency: str | None) -> None:
    """The tracked prices and your quotes as FOCUS 1.2 price rows (CSV or Parquet)."""
    from pathlib import Path

    from tracker.core.output_files import check_target
    from tracker.market.focus import export_rows, write_export

    if not out.strip():
        raise click.BadParameter("give a file name", param_hint="'--out'")
    check_target(out)  # a device, link or directory is refused before any work
    records = export_rows(app.db, as_of or datetime.now(UTC), currency)
    kind = write_export(records, Path(out))
    app.note(f"{len(records)} FOCUS price rows written to {out} ({kind})")


@click.command("focus-usage")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@format_option
@pass_app
def import_focus_usage(app: AppContext, file: str, fmt: str) -> None:
    """Import the GPU lines of a FOCUS cost and usage export (CSV) for `check invoices`.

    Every GPU line is checked first; if any is bad, each is printed as `line N: message` and
    nothing is imported (exit 1). Non-GPU lines (storage, network) are skipped.
    """
    import sys
    from pathlib import Path

    from tracker.market.focus import UsageFileError, import_usage_file

    try:
        summary = import_usage_file(app.db, Path(file), datetime.now(UTC))
    except UsageFileError as exc:
        for error in exc.errors:
            click.echo(str(error), err=True)
        click.echo(f"Error: {file}: {exc}", err=True)
        sys.exit(1)
    emit(summary, fmt)


@click.command("invoices")
@click.option("--since", type=Instant(), help="Charge periods starting from this date.")
@click.option("--until", type=Instant(end_of_day=True), help="... up to this date.")
@format_option
@pass_app
def check_invoices(app: AppContext, since: datetime | None, until: datetime | None,
                   fmt: str) -> None:
    """What each imported GPU usage line paid per GPU-hour against the tracked market that
    day: the same offer's list price, the cheapest comparable offer, and the saving."""
    from tracker.market.focus import CHECK_COLUMNS, invoice_check

    check_range(since, until)
    rows = invoice_check(app.db, since=since, until=until)
    if not rows and fmt == "table":
        app.note("no usage lines: `gpu-tracker import focus-usage FILE` first")
    emit(rows, fmt, list(CHECK_COLUMNS) if fmt != "json" else None)


# -- forecast ----------------------------------------------------------------------------------

FORECAST_COLUMNS = ["date", "p10", "p50", "p90"]


@click.command()
@click.option("--gpu", help="GPU class whose daily index median to forecast, e.g. h100.")
@click.option("--job", help="Forecast this configured workload's cost per run instead "
                            "([report] workloads).")
@category_option(INDEX_CATEGORIES, many=False, default="on-demand",
                 purpose=": the index series (with --gpu)")
@provider_option(" in the index (with --gpu)")
@region_option(" in the index (with --gpu)")
@click.option("--horizon-days", type=BoundedInt(1, 730), default=90, show_default=True,
              help="Days to forecast (1 to 730).")
@click.option("--history-days", type=BoundedInt(28, 3650), default=None,
              help="Days of history to fit and back-test. Default: 365 (--gpu), 180 (--job).")
@as_of_option("The last day of history (the forecast starts the day after)",
              default="today")
@click.option("--max-age-hours", type=POSITIVE_HOURS,
              help="Leave out prices not seen for this long at the sampling instant. "
                   "Default: [refresh] stale_after_hours.")
@currency_option("USD")
@format_option
@pass_app
def forecast(app: AppContext, gpu: str | None, job: str | None, category: str,
             providers: tuple[str, ...], regions: tuple[str, ...], horizon_days: int,
             history_days: int | None, as_of: datetime | None, max_age_hours: float | None,
             currency: str | None, fmt: str) -> None:
    """Forecast the daily price index (or a workload's cost per run) with P10/P50/P90 bands,
    and the method's rolling-origin back-test on the same history."""
    from tracker.market.forecasts import (
        DEFAULT_JOB_HISTORY_DAYS,
        DEFAULT_PRICE_HISTORY_DAYS,
        job_forecast,
        price_forecast,
    )

    if (gpu is None) == (job is None):
        raise click.UsageError("give --gpu X (the price index) or --job NAME, one of them")
    if job is not None and (providers or regions or category != "on-demand"):
        raise click.UsageError("--provider, --region and --category go with --gpu")
    when = as_of or datetime.now(UTC)
    currency = currency or "USD"
    if job is not None:
        answer = job_forecast(
            app.db, app.config.report.workloads, job, as_of=when,
            horizon_days=horizon_days, history_days=history_days or DEFAULT_JOB_HISTORY_DAYS,
            currency=currency, economics=app.config.economics_values())
    else:
        assert gpu is not None
        answer = price_forecast(
            app.db, resolve_gpus([gpu], app)[0], category=category, as_of=when,
            horizon_days=horizon_days,
            history_days=history_days or DEFAULT_PRICE_HISTORY_DAYS, currency=currency,
            max_age_hours=max_age_hours or _stale_hours(app),
            providers=[p.lower() for p in providers] or None, regions=list(regions) or None)
    data = answer.data
    if fmt == "csv":
        emit(data["points"], fmt, FORECAST_COLUMNS)
        return
    emit(data, fmt, table_text=_forecast_table(data) if fmt == "table" else None)


def _forecast_table(data: dict) -> str:
    from tracker.cli.commands.printing import field_lines, render_table

    subject = data.get("gpu") or data.get("job")
    bt = data["backtest"]
    errors = ", ".join(
        f"{h} d {'n/a' if e is None else f'{e:.1f}%'}"
        for h, e in zip(bt["horizons_days"], bt["median_abs_pct_error"], strict=True))
    mean_errors = ", ".join(
        f"{h} d {'n/a' if e is None else f'{e:.1f}%'}"
        for h, e in zip(bt["horizons_days"], bt["mean_abs_pct_error"], strict=True))
    coverage = ("n/a" if bt["band_coverage"] is None else
                f"{bt['band_coverage']:.0%} of {bt['evaluations']:,} (nominal "
                f"{bt['nominal_coverage']:.0%})")
    pairs = [
        ("forecast", f"{subject} {data['category']} ({data['currency']})"),
        ("method", data["method_description"]),
        ("history", f"{data['history_days']} days with an index point, "
                    f"{data['history_start']} to {data['last_observed']} (last "
                    f"{data['last_value']})"),
        ("fitted trend", f"{data['trend_pct_per_year']:+.1f}% a year"
         if data["trend_supported"] else
         "none the history supports (at least 90 days and 2 standard errors): the last "
         "value carried forward"),
        ("back-test", f"median |error| of the P50: {errors} (mean {mean_errors}); inside "
                      f"P10-P90: {coverage}, {bt['origins']} origins"),
    ]
    points = data["points"]
    shown = [p for k, p in enumerate(points) if k % 7 == 0 or k == len(points) - 1]
    table = render_table([dict(p) for p in shown], FORECAST_COLUMNS)
    return "\n".join([field_lines(pairs, data["warnings"]), "", table])
