"""`gpu-tracker check`: checks of prices and bills against the tracked market.

A click group: `gpu-tracker check` alone runs the cross-source price check;
`check catalogs` says how old the catalogs behind the catalog sources are, `check coverage` which
GPU classes with offers lack a figure, and `check invoices` compares imported FOCUS usage with
the market (tracker.cli.commands.market).
"""

from __future__ import annotations

from datetime import datetime

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.market import check_invoices
from tracker.cli.commands.options import as_of_option
from tracker.cli.commands.printing import emit, format_option

CHECK_COLUMNS = ["provider", "region", "instance_type", "category", "gpu", "gpu_count",
                 "authority_source", "authority_price_per_hour", "other_source",
                 "other_price_per_hour", "currency", "difference_pct"]


@click.group(invoke_without_command=True)
@as_of_option("Compare the prices valid")
@click.option("--threshold", default="5", show_default=True, metavar="PERCENT",
              help="List offers whose sources disagree by more than this percent.")
@format_option
@click.pass_context
def check(ctx: click.Context, as_of: datetime | None, threshold: str, fmt: str) -> None:
    """Cross-source price check: offers two sources report, at prices that disagree.

    The provider's own API is the authority for an offer's price; other sources are compared
    with it (tracker/answers/crosscheck.py). Exit status 0 whether or not disagreements are found.
    """
    if ctx.invoked_subcommand is not None:
        return
    app = ctx.find_object(AppContext)
    assert app is not None  # the root group's callback (tracker.cli.main) always creates it
    _cross_sources(app, as_of, threshold, fmt)


def _cross_sources(app: AppContext, as_of: datetime | None, threshold: str, fmt: str) -> None:
    from tracker.answers.crosscheck import cross_check
    from tracker.core.errors import InvalidInput
    from tracker.core.money import to_decimal

    try:
        threshold_pct = to_decimal(threshold, what="--threshold")
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--threshold") from None
    if not threshold_pct.is_finite() or threshold_pct < 0:
        raise click.BadParameter(f"must be a percent >= 0, got {threshold}",
                                 param_hint="--threshold")
    result = cross_check(app.db, as_of=as_of, threshold_pct=threshold_pct)
    app.note(f"{result.compared} offers are reported by two or more sources; "
             f"{len(result.disagreements)} disagree by more than {threshold}%")
    emit([d.to_json() for d in result.disagreements], fmt,
         CHECK_COLUMNS if fmt != "json" else None)

CATALOG_COLUMNS = ["source", "provider", "version", "published_at", "age_hours",
                   "max_age_hours", "stale"]


@check.command("catalogs")
@as_of_option("Catalog ages")
@format_option
@pass_app
def catalogs(app: AppContext, as_of: datetime | None, fmt: str) -> None:
    """How old each catalog behind gpuhunt and SkyPilot is; stale ones are flagged."""
    from tracker.answers.catalogs import catalog_ages

    rows = catalog_ages(app.db, as_of)
    stale = [f"{r.source}/{r.provider}" for r in rows if r.stale]
    if stale:
        app.note(f"stale catalogs: {', '.join(stale)}")
    emit([r.to_json() for r in rows], fmt, CATALOG_COLUMNS if fmt != "json" else None)


COVERAGE_COLUMNS = ["gpu", "name", "offers", "sizeable", "missing", "fallbacks"]


@check.command("coverage")
@as_of_option("Offers valid")
@format_option
@pass_app
def coverage(app: AppContext, as_of: datetime | None, fmt: str) -> None:
    """GPU classes with stored offers and which figures each lacks.

    Exit status 1 when a class with offers cannot be sized (it lacks a figure sizing needs:
    give it in data/gpus.json or the configuration's [gpus.<id>]).
    """
    import sys

    from tracker.answers.gpu_catalog import coverage as gpu_coverage

    rows = gpu_coverage(app.db, as_of)
    blocked = [r for r in rows if not r.sizeable]
    for row in blocked:
        app.note(f"{row.gpu} ({row.offers} offers) cannot be sized: no "
                 f"{' or '.join(row.missing)}")
    if fmt == "json":
        emit([r.to_json() for r in rows], fmt)
    else:
        emit([{**r.to_json(), "missing": ", ".join(r.missing),
               "fallbacks": ", ".join(r.fallbacks)} for r in rows], fmt, COVERAGE_COLUMNS)
    if blocked:
        sys.exit(1)


check.add_command(check_invoices)
