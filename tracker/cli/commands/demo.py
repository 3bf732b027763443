"""`gpu-tracker demo`: the main job on the embedded default data.

It opens the configured database (a SQLite file in the user data directory unless --db or
GPU_TRACKER_DB says otherwise), loads the bundled dated prices through the same ingest path
as every source (idempotently; it never deletes anything), then runs the product's commands
on them as a user would type them, ending with the weekly report.
"""

from __future__ import annotations

import shlex

import click

from tracker.cli.commands import AppContext, load_command, pass_app

# (title, command line). Each runs through the real CLI with the demo's database.
STEPS: list[tuple[str, str]] = [
    ("Price sources and their freshness", "sources"),
    ("Cheapest offer per GPU and pricing category, now", "prices --cheapest"),
    ("The same question as of a past date: AWS H100 before the June 2025 price cut",
     "prices --gpu h100-sxm --provider aws --category on-demand --as-of 2025-06-01"),
    ("Price history of AWS H100 on-demand (one row per price span)",
     "history --gpu h100-sxm --provider aws --category on-demand"),
    ("The H100 price index: median, p10, p90 per GPU-hour over providers, each counted once",
     "index --gpu h100-sxm --since 2026-11-16 --until 2026-11-22"),
    ("Where the H100 index goes in the next 90 days, with P10-P90 and the method's back-test",
     "forecast --gpu h100-sxm --as-of 2026-11-22 --horizon-days 90"),
    ("The cheapest H100 offers in euros, each at the ECB rate of its own day",
     "prices --gpu h100-sxm --cheapest --currency EUR"),
    ("Serving Llama 3.1 70B at 128K context: memory and the smallest plan",
     "size --model llama-3.1-70b --workload inference --precision bf16 --context 131072 "
     "--concurrency 1 --gpu h100-sxm"),
    ("Fine-tuning Llama 3.1 8B on 2B tokens on 8 x H100 (ZeRO-3): memory, plan and time",
     "size --model llama-3.1-8b --workload full-finetune --sharding zero3 --gpu h100-sxm "
     "--count 8 --tokens 2e9"),
    ("Its cost per run, priced from the cheapest stored offer, and per success at p = 0.8",
     "cost --model llama-3.1-8b --workload full-finetune --sharding zero3 --tokens 2e9 "
     "--gpu h100-sxm --count 8 --success-rate 0.8"),
    ("One GPU or a cluster, which provider: every fitting GPU and count, by cost per run",
     "compare --model llama-3.1-8b --workload full-finetune --sharding zero3 --tokens 2e9 "
     "--limit 12"),
    ("Serving Llama 3.1 70B at 20 tokens/s per user and 50M output tokens a day: every "
     "offer by cost per million output tokens",
     "compare --model llama-3.1-70b --prompt-tokens 1000 --output-tokens 1000 "
     "--max-tpot-ms 50 --output-tokens-per-day 50M --limit 8"),
    ("The same load in NVFP4 on B200 (FP4 tensor cores) against AMD MI300X (4-bit weights, "
     "BF16 compute: a warning), by cost per million output tokens",
     "compare --model llama-3.1-70b --precision fp4 --kv-precision fp8 --prompt-tokens 1000 "
     "--output-tokens 1000 --max-tpot-ms 50 --output-tokens-per-day 50M --gpu b200 "
     "--gpu mi300x --limit 6"),
    ("A mixture of experts as shipped: DeepSeek-V3 in FP8 blocks (37B of 671B parameters "
     "active per token, MLA's 69 KiB of KV per token) on 8 x H200",
     "size --model deepseek-v3 --precision native --gpu h200 --prompt-tokens 1000 "
     "--output-tokens 1000"),
    ("gpt-oss-120b as shipped (MXFP4 experts) on one H100, per million output tokens",
     "cost --model gpt-oss-120b --precision native --gpu h100-sxm --count 1"),
    ("Next to a dense model: Llama 3.3 70B in FP8 on two H100s",
     "cost --model llama-3.3-70b --precision fp8 --gpu h100-sxm --count 2"),
    ("A 200-hour job on AWS p5.48xlarge spot with 5-minute checkpoints vs on-demand",
     "spot --work-hours 200 --provider aws --instance p5.48xlarge --region us-east-1 "
     "--checkpoint-minutes 5 --restart-minutes 10 --deadline-hours 230"),
    ("The same run simulated 10,000 times against a 225-hour deadline: the spread of its time "
     "and cost, the chance of making it, and the cheapest way to make it 19 times in 20",
     "spot --work-hours 200 --provider aws --instance p5.48xlarge --region us-east-1 "
     "--checkpoint-minutes 5 --restart-minutes 10 --deadline-hours 225 --simulate 10000 "
     "--min-probability 0.95"),
    ("Rent or buy 8 x H100 at 60% utilization, against the cheapest stored on-demand price",
     "breakeven --gpu h100-sxm --count 8 --utilization 0.6"),
]


def _heading(title: str, command: str) -> None:
    click.echo("")
    click.echo(click.style(f"== {title}", bold=True))
    click.echo(click.style(f"$ gpu-tracker {command}", dim=True))


# The commitment plan of the example usage (data/usage-example.csv: A100 80GB PCIe in Azure
# eastus2, 8 GPUs all the time and 8 more on weekdays, Oct-Nov 2026) against the bundled
# Azure savings-plan rates.
PLAN_TITLE = ("How many A100s to commit for a month and a half of real-shaped usage, on which "
              "term, back-tested over the stored prices")
PLAN_ARGS = ["--horizon-months", "36", "--as-of", "2026-11-23"]


def _plan_step(app: AppContext) -> None:
    import tempfile
    from pathlib import Path

    from tracker.core.data_files import read_text

    _heading(PLAN_TITLE, "plan commitments --usage data/usage-example.csv "
             + " ".join(PLAN_ARGS))
    with tempfile.TemporaryDirectory(prefix="gpu-tracker-demo-") as tmp:
        usage = Path(tmp) / "usage-example.csv"
        usage.write_text(read_text("usage-example.csv"), encoding="utf-8")
        _run(app, "plan", ["commitments", "--usage", str(usage), *PLAN_ARGS])


# A month of the same fleet's spend as a FOCUS export (data/focus-usage-example.csv, written by
# tools/focus_sample.py: 1-29 November 2026 at the bundled pay-as-you-go price, tagged
# project=gpu-tracker-demo) against the demo's budget, which applies only when the
# configuration has no [[budgets]] of its own.
BUDGET_TITLE = ("A month of A100 spend against a $34,000 budget: the example FOCUS export "
                "imported, then the spend to date and the end-of-month forecast on 22 November")
BUDGET_AS_OF = "2026-11-22"
DEMO_BUDGET = {"name": "A100s in eastus2 (demo)", "amount": "34000", "currency": "USD",
               "period": "month", "provider": "azure", "gpu": "a100",
               "tag": "project=gpu-tracker-demo"}


def _budget_step(app: AppContext) -> AppContext:
    """Import the example FOCUS export (once: the import is keyed by the file's hash) and show
    the budget; returns the context the report is built with (the demo budget added when the
    configuration has none)."""
    import dataclasses
    import tempfile
    from pathlib import Path

    from tracker.config.schema import Config
    from tracker.config.sections import BudgetEntry
    from tracker.core.data_files import read_text

    config = app.config
    if not config.budgets:
        config = Config(config.settings.model_copy(
            update={"budgets": [BudgetEntry.model_validate(DEMO_BUDGET)]}), config.path)
    demo_app = dataclasses.replace(app, _config=config)
    _heading(BUDGET_TITLE, "import focus-usage data/focus-usage-example.csv")
    with tempfile.TemporaryDirectory(prefix="gpu-tracker-demo-") as tmp:
        sample = Path(tmp) / "focus-usage-example.csv"
        sample.write_text(read_text("focus-usage-example.csv"), encoding="utf-8")
        _run(demo_app, "import", ["focus-usage", str(sample)])
    _heading("... and the budget: spend to date, forecast P50/P90, status",
             f"budgets status --as-of {BUDGET_AS_OF}")
    if config is not app.config:
        click.echo(click.style("(the demo's budget, as the configuration has none: [[budgets]] "
                               + ", ".join(f"{k} = {v!r}" for k, v in DEMO_BUDGET.items())
                               + ")", dim=True))
    _run(demo_app, "budgets", ["status", "--as-of", BUDGET_AS_OF])
    return demo_app


def _run(app: AppContext, name: str, args: list[str]) -> None:
    command = load_command(name)
    assert command is not None, name  # the demo names registered commands only
    # The same click command a user runs, sharing this process's database and config.
    command.main(args=args, prog_name=f"gpu-tracker {name}", standalone_mode=False, obj=app)


@click.command()
@click.option("--report-dir", type=click.Path(file_okay=False), default=None,
              help="Where to write the weekly report (default: [report] out_dir).")
@pass_app
def demo(app: AppContext, report_dir: str | None) -> None:
    """Load the bundled prices and show what the tool does, ending with the weekly report."""
    from tracker.collect.refresh import refresh_job
    from tracker.store.db import safe_url

    app.note(f"database: {safe_url(app.database_url)}")
    # The same locked, recorded refresh that cron and the scheduler run.
    run = refresh_job(app.db, app.config, ["bundled"], trigger="manual", wait=60)
    if run.exit_code:
        raise click.ClickException(f"loading bundled prices failed: {run.summaries[0].error}")
    if run.summaries:
        loaded = run.summaries[0]
        app.note(f"bundled prices: {loaded.offers_seen} observations, {loaded.new_offers} "
                 f"new offers, {loaded.prices_changed} price changes, {loaded.rejected} "
                 "rejected")
    else:
        app.note("bundled prices: another run is loading them; showing what is stored")

    for title, command in STEPS:
        _heading(title, command)
        name, *args = shlex.split(command)
        _run(app, name, args)

    _plan_step(app)
    with_budget = _budget_step(app)

    from reports import build_and_archive

    archived = build_and_archive(app.db, with_budget.config, out_dir=report_dir)
    _heading("Weekly report", "report weekly")
    click.echo(f"weekly report written to {archived.path_html}")
