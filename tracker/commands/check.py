"""`gpu-tracker check`: checks of prices and bills against the tracked market.

The bare command is the cross-source price check (issue #13, another branch); `check invoices`
compares imported FOCUS usage with the market (tracker.commands.market).
"""

from __future__ import annotations

import click

from tracker.commands.market import check_invoices


@click.group(invoke_without_command=True)
@click.pass_context
def check(ctx: click.Context) -> None:
    """Check prices across sources (bare `check`) or invoices against the market."""
    if ctx.invoked_subcommand is None:
        raise click.ClickException("the cross-source price check is not available yet; "
                                   "`gpu-tracker check invoices` checks imported invoices")


check.add_command(check_invoices)
