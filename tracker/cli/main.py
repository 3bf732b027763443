"""The `gpu-tracker` command line: a thin click layer over the library.

Commands are imported lazily from `tracker.cli.commands.*` so that a fast command (breakeven,
size) never pays for pandas, SQLAlchemy or the scrapers. Errors from the library arrive as
`TrackerError` and leave as one line on stderr with exit 1 (usage errors exit 2); `--debug`
shows the traceback instead.

This is the single error boundary: expected failures that are not `TrackerError` (database
locked, read-only, corrupt, disk full, server unreachable, permission denied, bad encoding,
numeric overflow; `tracker.core.errors.describe_failure`) also leave as one line with exit 1,
an interrupt as one line with exit 130, and every message passes the secret scrubber.
"""

from __future__ import annotations

import logging
import sys

import click

from tracker import __version__
from tracker.cli.commands import COMMANDS, AppContext, load_command
from tracker.core.errors import InvalidInput, TrackerError, describe_failure
from tracker.core.secrets import ScrubbingFilter, scrub

INTERRUPTED_EXIT = 130  # 128 + SIGINT, what shells report for Ctrl-C

class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return load_command(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, BrokenPipeError):
            raise
        except TrackerError as exc:
            app = ctx.find_object(AppContext)
            if app is not None and app.debug:
                raise
            if getattr(exc, "usage", False) or (
                    isinstance(exc, InvalidInput) and _while_parsing(exc)):
                raise click.UsageError(str(exc)) from None
            raise click.ClickException(str(exc)) from None
        except Exception as exc:
            app = ctx.find_object(AppContext)
            message = describe_failure(exc)
            if message is None or (app is not None and app.debug):
                raise
            raise click.ClickException(message) from None

    def main(self, args=None, prog_name=None, complete_var=None,
             standalone_mode: bool = True, **extra):
        """Click's main, with every error as exactly one scrubbed line on stderr."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except _NO_ARGS_IS_HELP as exc:  # `gpu-tracker` alone: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = ""
            if exc.ctx is not None and exc.cmd is not None:
                hint = f" (see '{exc.ctx.command_path} --help')"
            click.echo(f"Error: {scrub(_first_line(exc.format_message()))}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"Error: {scrub(_first_line(exc.format_message()))}", err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            click.echo("Error: interrupted", err=True)
            sys.exit(INTERRUPTED_EXIT)
        except BrokenPipeError:  # `gpu-tracker prices | head`: the reader left, not an error
            sys.exit(0)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
        sys.exit(0)


# click >= 8.2 raises this (a UsageError) for a group called without a command.
_NO_ARGS_IS_HELP: type[click.UsageError] | tuple[()] = getattr(
    click.exceptions, "NoArgsIsHelpError", ())


def _first_line(text: str) -> str:
    """The message's first line, with control and bidi characters from the data made
    visible (a provider's name must not drive the terminal)."""
    from tracker.cli.commands.printing import terminal_safe

    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return terminal_safe(" ".join(lines) if len(lines) <= 1 else lines[0])


def _while_parsing(exc: BaseException) -> bool:
    """An InvalidInput raised by a click parameter type (bad option value) is a usage error."""
    tb = exc.__traceback__
    while tb is not None:
        if isinstance(tb.tb_frame.f_locals.get("self"), click.ParamType):
            return True
        tb = tb.tb_next
    return False


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpu-tracker")
@click.option("--db", "db_url", envvar="GPU_TRACKER_DB", show_envvar=True, metavar="URL",
              help="Database URL (sqlite:///path.db or postgresql+psycopg://...). "
                   "Default: a SQLite file in the user data directory.")
@click.option("--config", "config_path", envvar="GPU_TRACKER_CONFIG", show_envvar=True,
              metavar="FILE",
              type=click.Path(dir_okay=False), help="Configuration TOML file.")
@click.option("-v", "--verbose", count=True, help="More messages on stderr (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, envvar="GPU_TRACKER_QUIET", show_envvar=True,
              help="Only errors on stderr.")
@click.option("--debug", is_flag=True, envvar="GPU_TRACKER_DEBUG", show_envvar=True,
              help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None, config_path: str | None, verbose: int,
        quiet: bool, debug: bool) -> None:
    """Track dated GPU prices, size workloads and do the economics.

    Data goes to stdout, messages to stderr. The options whose help names an environment
    variable (env var: GPU_TRACKER_...) can also be set by it; the configuration's keys by
    GPU_TRACKER_<SECTION>_<KEY>.
    """
    level = logging.ERROR if quiet else (
        logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr, force=True)
    logging.captureWarnings(True)  # warnings.warn from libraries become one-line log records
    for handler in logging.getLogger().handlers:
        handler.addFilter(ScrubbingFilter())
    import os

    from tracker.core.secrets import learn_environ

    learn_environ(os.environ)
    app = AppContext(db_url=db_url, config_path=config_path, quiet=quiet, debug=debug,
                     verbosity=verbose)
    ctx.obj = app
    ctx.call_on_close(app.close)
    if config_path is not None:
        # A file named on purpose is read and checked by every command, also the ones that
        # need none of its keys (a typo in it must not pass silently).
        app.config  # noqa: B018
    if ctx.invoked_subcommand != "config":
        app.apply_gpu_config()


# CPython collects its youngest generation every 700 net allocations. A command allocates
# millions of small objects it keeps to the end (price rows, sizing memo entries, the report's
# JSON) and frees few, so each collection scans survivors in vain: about 20% of the weekly
# report's CPU on a 50,000-offer store and 10% of `compare` (bench/gc_threshold.py). Every
# 100,000 keeps the scans to a handful at ~14% more peak memory; cycles are still collected.
GC_THRESHOLDS = (100_000, 50, 100)


def tune_gc() -> None:
    """The garbage collector's thresholds for a command's run (GC_THRESHOLDS)."""
    import gc

    gc.set_threshold(*GC_THRESHOLDS)


def main() -> None:
    tune_gc()
    cli(prog_name="gpu-tracker")
