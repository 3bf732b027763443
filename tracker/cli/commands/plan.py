"""`gpu-tracker plan commitments`: how many GPUs to commit from real usage (the click layer).

Thin: parse options, call `tracker.market.commitments.commitment_plan`, print.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from tracker.cli.commands import AppContext, economics_settings, pass_app
from tracker.cli.commands.options import as_of_option, currency_option
from tracker.cli.commands.params import MINUTES, MTTI_HOURS, BoundedFloat
from tracker.cli.commands.printing import emit, format_option, money_text, render_table

SHARE = BoundedFloat(0, 1, why="a share")


@click.group()
def plan() -> None:
    """Plans from usage: what to commit (`plan commitments`)."""


@plan.command("commitments")
@click.option("--usage", "usage_file", type=click.Path(exists=True, dir_okay=False),
              help="A FOCUS cost-and-usage export, or a CSV with gpu,region,gpu_hours and "
                   "hour or day (provider optional). Default: the imported FOCUS usage "
                   "(`import focus-usage`).")
@click.option("--workload", "workload_name", metavar="NAME",
              help="A [[report.workloads]] entry on its schedule (runs_per_month or "
                   "hours_per_month), run as the report recommends it, as the usage.")
@click.option("--horizon-months", type=click.Choice(["12", "36"]), default="12",
              show_default=True, help="How long the plan runs: 12 allows 1-year terms, 36 "
                                      "also 3-year terms.")
@click.option("--interruptible-share", type=SHARE, default=0.0, show_default=True,
              help="Share of the uncommitted GPU-hours that may run on spot, priced with the "
                   "spot engine's checkpoint/restart overhead.")
@click.option("--checkpoint-minutes", type=MINUTES,
              help="Checkpoint time δ (needed with --interruptible-share).")
@click.option("--restart-minutes", type=MINUTES,
              help="Restart time R (needed with --interruptible-share).")
@click.option("--mtti-hours", type=MTTI_HOURS,
              help="Spot mean time to interruption per node. Default: the provider's "
                   "default ([economics.mtti_hours]).")
@click.option("--backtest-months", type=click.IntRange(0, 36), default=0, show_default=True,
              help="Also replay the plan over the N months before the usage (its days "
                   "repeated in order) at the prices stored then.")
@as_of_option("Plan with the prices valid")
@click.option("--days", "show_days", is_flag=True,
              help="Table output: also list the back-test's day-by-day prices and costs.")
@currency_option("USD")
@format_option
@pass_app
def commitments(app: AppContext, usage_file: str | None, workload_name: str | None,
                horizon_months: str,
                interruptible_share: float, checkpoint_minutes: float | None,
                restart_minutes: float | None, mtti_hours: float | None,
                backtest_months: int, as_of: datetime | None, show_days: bool,
                currency: str | None, fmt: str) -> None:
    """How many GPUs of each class and region to commit, on which term, what stays
    on-demand and goes to spot, the monthly cost against all on-demand and all spot, and the
    plan's back-test over the stored prices (docs/economics.md §1.6)."""
    from tracker.core.serialization import versioned_document
    from tracker.market.commitments import PLAN_COLUMNS, commitment_plan

    db = app.db
    settings = economics_settings(app)
    as_of = as_of or datetime.now(UTC)
    usage, workload = _usage(app, usage_file, workload_name, as_of, settings, currency)
    if workload is not None:  # the spot share is priced with its checkpoint and restart
        if checkpoint_minutes is None:
            checkpoint_minutes = workload.checkpoint_minutes
        if restart_minutes is None:
            restart_minutes = workload.restart_minutes

    def mtti_for(provider: str) -> float:
        return mtti_hours if mtti_hours is not None else settings.default_mtti_hours(provider)[0]

    document = commitment_plan(
        db, usage, horizon_months=int(horizon_months), as_of=as_of,
        interruptible_share=interruptible_share,
        checkpoint_hours=None if checkpoint_minutes is None else checkpoint_minutes / 60,
        restart_hours=None if restart_minutes is None else restart_minutes / 60,
        mtti_for=mtti_for, currency=currency or "USD",
        hours_per_month=settings.value("hours_per_month"), backtest_months=backtest_months)
    for warning in document["warnings"]:
        app.note(f"warning: {warning}")
    for line in document["lines"]:  # the table has no column for them
        for warning in line["warnings"]:
            app.note(f"warning: {line['gpu']} {line['region']} {line['provider']}: {warning}")
    if fmt == "json":
        emit(versioned_document("commitment-plan", 1, document), fmt)
        return
    rows = [{c: line.get(c) for c in PLAN_COLUMNS} for line in document["lines"]]
    if fmt == "csv":
        emit(rows, fmt, PLAN_COLUMNS)
        return
    emit(rows, fmt, table_text=plan_text(document, rows, show_days))


def _usage(app: AppContext, usage_file: str | None, workload_name: str | None,
           as_of: datetime, settings: Any, currency: str | None) -> tuple[Any, Any]:
    """The usage to plan (a file, a report workload on its schedule, or the imported FOCUS
    usage) and the workload when it is one."""
    from tracker.core.errors import InvalidInput
    from tracker.market.commitments import usage_from_file, usage_from_store, usage_from_workload

    if usage_file is not None and workload_name is not None:
        raise click.UsageError("give --usage FILE or --workload NAME, not both")
    if workload_name is not None:
        return usage_from_workload(
            app.db, app.config.report.workloads, workload_name,
            as_of=as_of, settings=settings, currency=currency or "USD")
    if usage_file is not None:
        return usage_from_file(app.db, Path(usage_file).read_text(encoding="utf-8-sig"),
                               where=Path(usage_file).name), None
    found = usage_from_store(app.db)
    if found is None:
        raise InvalidInput("no usage: give --usage FILE or --workload NAME, or `gpu-tracker "
                           "import focus-usage FILE` first")
    return found, None


def plan_text(document: dict, rows: list[dict], show_days: bool) -> str:
    """The plan for people: the lines, the monthly totals, the back-test."""
    currency = document["currency"]
    totals, bt = document["totals"], document["backtest"]
    shown = [{"gpu": r["gpu"], "region": r["region"], "provider": r["provider"],
              "commit": r["commit_gpus"], "term": r["term"] or "-",
              "committed/GPU-h": r["committed_price_per_gpu_hour"],
              "on-demand/GPU-h": r["on_demand_price_per_gpu_hour"],
              "on-demand GPU-h/mo": r["on_demand_gpu_hours"],
              "spot GPU-h/mo": r["spot_gpu_hours"],
              "monthly": money_text(r["expected_monthly_cost"], currency),
              "break-even util": r["break_even_utilization"]} for r in rows]
    out = [render_table(shown), "",
           f"monthly: plan {money_text(totals['plan'], currency)}, all on-demand "
           f"{money_text(totals['all_on_demand'], currency)}, all spot "
           f"{money_text(totals['all_spot'], currency)}; saving "
           f"{totals['saving_pct'] if totals['saving_pct'] is not None else '-'}% "
           f"(horizon {document['horizon_months']} months)",
           f"back-test {bt['since']} to {bt['until']} ({', '.join(bt['months']) or '-'}): "
           f"plan {money_text(bt['plan_cost'], currency)}, all on-demand "
           f"{money_text(bt['all_on_demand_cost'], currency)}, all spot "
           f"{money_text(bt['all_spot_cost'], currency)}",
           f"method: {document['method']}"]
    if show_days and bt["days"]:
        out += ["", render_table([{k: d[k] for k in (
            "date", "gpu", "region", "provider", "gpu_hours", "on_demand_price_per_gpu_hour",
            "spot_price_per_gpu_hour", "committed_price_per_gpu_hour", "plan_cost",
            "all_on_demand_cost")} for d in bt["days"]])]
    return "\n".join(out)
