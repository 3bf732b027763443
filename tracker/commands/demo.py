"""`gpu-tracker demo`: the main job on the embedded default data.

It opens the configured database (a SQLite file in the user data directory unless --db or
GPU_TRACKER_DB says otherwise), loads the bundled dated prices through the same ingest path
as every source (idempotently; it never deletes anything), then runs the product's commands
on them, ending with the weekly report.
"""

from __future__ import annotations

import click

from tracker.commands import AppContext, pass_app


def _heading(title: str, command: str) -> None:
    click.echo("")
    click.echo(click.style(f"== {title}", bold=True))
    click.echo(click.style(f"$ gpu-tracker {command}", dim=True))


@click.command()
@click.option("--report-dir", type=click.Path(file_okay=False), default=None,
              help="Where to write the weekly report (default: [report] out_dir).")
@click.pass_context
@pass_app
def demo(app: AppContext, ctx: click.Context, report_dir: str | None) -> None:
    """Load the bundled prices and show what the tool does, ending with the weekly report."""
    from tracker.commands.core import history, prices, sources
    from tracker.db import safe_url
    from tracker.refresh import exit_code, refresh_sources

    app.note(f"database: {safe_url(app.database_url)}")
    summaries = refresh_sources(app.db, app.config, ["bundled"], trigger="demo")
    if exit_code(summaries):
        raise click.ClickException(f"loading bundled prices failed: {summaries[0].error}")
    s = summaries[0]
    app.note(f"bundled prices: {s.offers_seen} observations, {s.new_offers} new offers, "
             f"{s.prices_changed} price changes, {s.rejected} rejected")

    steps: list[tuple[str, str, click.Command, dict]] = [
        ("Price sources and freshness", "sources", sources, {"fmt": "table"}),
        ("Cheapest offer per GPU and category, now", "prices --cheapest", prices,
         {"cheapest": True, "fmt": "table"}),
        ("H100 prices on AWS over time (price spans)",
         "history --gpu h100-sxm --provider aws --category on-demand", history,
         {"gpus": ("h100-sxm",), "providers": ("aws",), "categories": ("on-demand",),
          "fmt": "table"}),
    ]
    for title, command, cmd, kwargs in steps:
        _heading(title, command)
        ctx.invoke(cmd, **kwargs)
