"""Commands over the price store: init, sources, prices, history, gpus."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import (
    as_of_option,
    category_option,
    currency_option,
    provider_option,
    region_option,
)
from tracker.cli.commands.params import (
    MIN_GPUS,
    MONEY,
    OPEN_DECIMAL_FRACTION,
    ROW_LIMIT,
    Instant,
    check_range,
    resolve_gpus,
)
from tracker.cli.commands.printing import emit, format_option

PRICE_COLUMNS = ["provider", "region", "instance_type", "gpu", "gpu_count", "category",
                 "ownership", "price_per_hour", "price_per_gpu_hour", "currency", "observed_at",
                 "node_link", "cluster_network", "cluster_gbps"]


@click.command()
@pass_app
def init(app: AppContext) -> None:
    """Create the database, or upgrade an older one to the current schema."""
    from tracker.store.db import HEAD_REVISION, check_writable, safe_url

    db = app.db
    check_writable(db)  # "ready" must mean a refresh can write, not just that it opened
    app.note(f"database ready at {safe_url(db.url)} (schema revision {HEAD_REVISION})")


@click.command()
@as_of_option("Freshness judged")
@format_option
@pass_app
def sources(app: AppContext, as_of: datetime | None, fmt: str) -> None:
    """Every price source with its last run, status and freshness.

    With --as-of, as they stood then: the runs started by then and the prices valid then,
    judged by the one freshness rule (tracker/answers/freshness.py)."""
    columns = None if fmt == "json" else [
        "source", "last_status", "last_success_at", "age_hours", "fresh", "offers",
        "rejected_last_run", "key", "last_error"]
    emit(source_rows(app, as_of), fmt, columns)


def source_rows(app: AppContext, as_of: datetime | None = None) -> list[dict]:
    """Per source its last run, status and freshness at `as_of` (default: now), from the runs
    and prices up to then."""
    import os

    from scrapers import SOURCES, load_source
    from tracker.answers.freshness import source_freshness, stale_after_hours
    from tracker.store.queries import source_statuses

    now = as_of or datetime.now(UTC)
    stale_after = stale_after_hours(app.config)
    rows = []
    for status in source_statuses(app.db, SOURCES, as_of=as_of):
        cls = load_source(status.source) if status.source in SOURCES else None
        key_env = getattr(cls, "SECRET_ENV", None)
        freshness = source_freshness(
            last_run_at=status.last_run_at, last_status=status.last_status,
            last_success_at=status.last_success_at, now=now, stale_after_hours=stale_after,
            newest_price_at=status.newest_price_at)
        age = freshness.age_hours
        rows.append({
            "source": status.source,
            "description": getattr(cls, "description", "") if cls else "(not registered)",
            "key": (key_env + (" (set)" if os.environ.get(key_env) else " (missing)"))
            if key_env else "",
            "last_run_at": status.last_run_at,
            "last_status": status.last_status,
            "last_success_at": status.last_success_at,
            "newest_price_at": status.newest_price_at,
            "age_hours": round(age, 2) if age is not None else None,
            "fresh": freshness.fresh,
            "offers": status.offers,
            "rejected_last_run": status.rejected_last_run,
            "last_error": status.last_error,
        })
    return rows


@click.command()
@click.option("--gpu", "gpus", multiple=True, help="GPU model (repeatable), e.g. h100, a100-80gb.")
@provider_option()
@region_option()
@category_option()
@click.option("--min-gpus", type=MIN_GPUS, help="At least this many GPUs.")
@click.option("--max-price", type=MONEY, help="At most this price per GPU-hour.")
@as_of_option()
@click.option("--cheapest", is_flag=True,
              help="Only the cheapest rental per GPU and category (quotes with --include-quotes).")
@click.option("--include-quotes", is_flag=True,
              help="With --cheapest: also hardware quotes, priced as owned cost per GPU-hour.")
@click.option("--owned-utilization", type=OPEN_DECIMAL_FRACTION,
              help="Share of hours owned GPUs work, for quotes' owned cost (default: "
                   "[economics] owned_utilization, 0.6).")
@click.option("--limit", type=ROW_LIMIT, help="At most this many rows.")
@currency_option()
@format_option
@pass_app
def prices(app: AppContext, gpus: tuple[str, ...], providers: tuple[str, ...],
           regions: tuple[str, ...], categories: tuple[str, ...], min_gpus: float | None,
           max_price: Decimal | None, as_of: datetime | None, cheapest: bool,
           include_quotes: bool, owned_utilization: Decimal | None, limit: int | None,
           currency: str | None, fmt: str) -> None:
    """Offers with their price as of a date, cheapest per GPU-hour first.

    Hardware quotes (category `quote`) are priced as owned cost per used GPU-hour (capex
    over the life plus power x PUE, colo and staff, at the owned utilization) and labelled
    `owned`; everything else is a `rental`.
    """
    from tracker.core.categories import QUOTE_CATEGORY
    from tracker.economics.owned import price_quotes
    from tracker.store.known import check_providers, check_regions
    from tracker.store.queries import cheapest_of, cheapest_per_gpu, price_rows

    filters: dict[str, Any] = {  # price_rows' keyword filters
        "gpu": resolve_gpus(gpus, app) if gpus else None,
        "provider": list(providers) or None, "region": list(regions) or None,
        "category": list(categories) or None, "min_gpus": min_gpus, "max_price": max_price,
    }
    check_providers(app.db, providers)
    check_regions(app.db, regions)
    utilization = owned_utilization
    # Cap, pick and rank after quotes are priced as owned and prices converted.
    if cheapest and not include_quotes and not currency and max_price is None:
        # Nothing to price or convert first: the store picks the candidates.
        rows = cheapest_per_gpu(app.db, as_of=as_of, **{**filters, "max_price": None})
    else:
        rows = price_rows(app.db, as_of=as_of, **{**filters, "max_price": None})
    if cheapest and not include_quotes and QUOTE_CATEGORY not in categories:
        rows = [r for r in rows if r.category != QUOTE_CATEGORY]
    if any(r.category == QUOTE_CATEGORY for r in rows):
        from tracker.economics import defaults as econ_defaults

        settings = econ_defaults.EconomicsSettings(app.config.economics_values())
        from tracker.store.rates import rate_table

        db = app.db
        # In the quote's own currency, the defaults converted into it.
        rows = price_quotes(rows, settings, utilization, rates=lambda: rate_table(db))
    if currency:
        # Each offer at its own day's ECB rate.
        from tracker.core.fx import stale_rate_note
        from tracker.store.rates import priced_in

        rows = priced_in(app.db, rows, currency, as_of)
        note = stale_rate_note(rows, as_of)
        if note:
            app.note(f"warning: {note}")
    if max_price is not None:
        rows = [r for r in rows if r.price_per_gpu_hour <= max_price]
    if cheapest:
        rows = cheapest_of(rows)
        rows.sort(key=lambda r: (r.price_per_gpu_hour, r.gpu))
    if limit:
        rows = rows[:limit]
    if not rows and fmt == "table":
        app.note("no prices match; `gpu-tracker sources` shows what has been loaded")
    data = [r.to_json() for r in rows]
    columns = PRICE_COLUMNS
    if fmt != "json" and any("fx" in row for row in data):
        columns = [*PRICE_COLUMNS, "fx"]
        for row in data:
            fx = row.pop("fx", None)
            row["fx"] = f"{fx['from']} {fx['rate']} ({fx['rate_date']})" if fx else ""
    table = None
    if fmt == "table":
        from tracker.cli.commands.printing import render_table, round_for_people
        from tracker.economics.owned import owned_notes

        notes = owned_notes(data)  # the parts as computed, before rounding for people
        round_for_people(data, ("price_per_hour", "price_per_gpu_hour"), rate=True)
        if data:
            table = "\n".join([render_table(data, columns), *notes])
    emit(data, fmt, columns if fmt != "json" else None, table_text=table)


@click.command()
@click.option("--gpu", "gpus", multiple=True, required=True, help="GPU model (repeatable).")
@provider_option()
@category_option()
@region_option()
@click.option("--since", type=Instant(), help="From this date/time (UTC).")
@click.option("--until", type=Instant(end_of_day=True), help="Up to this date/time (UTC).")
@currency_option()
@format_option
@pass_app
def history(app: AppContext, gpus: tuple[str, ...], providers: tuple[str, ...],
            categories: tuple[str, ...], regions: tuple[str, ...], since: datetime | None,
            until: datetime | None, currency: str | None, fmt: str) -> None:
    """Price history of a GPU model: one row per price span, oldest first."""
    from tracker.core.money import display_rate
    from tracker.store.known import check_providers, check_regions
    from tracker.store.queries import history as load_history

    check_range(since, until)
    gpu_ids = resolve_gpus(gpus, app)
    check_providers(app.db, providers)
    check_regions(app.db, regions)
    points = load_history(app.db, gpu_ids, provider=list(providers) or None,
                          category=list(categories) or None, region=list(regions) or None,
                          since=since, until=until)
    rows: list[dict[str, Any]] = [{
        "valid_from": p.valid_from, "valid_to": p.valid_to, "last_seen": p.last_seen,
        "provider": p.provider, "region": p.region, "instance_type": p.instance_type,
        "gpu": p.gpu, "gpu_count": p.gpu_count, "category": p.category,
        "price_per_hour": p.price_per_hour, "price_per_gpu_hour": p.price_per_gpu_hour,
        "currency": p.currency,
    } for p in points]
    if currency:
        from tracker.store.rates import rate_table

        rates = rate_table(app.db) if any(p.currency != currency for p in points) else None
        for row in rows:
            if row["currency"] == currency:
                continue
            assert rates is not None  # loaded above whenever a point is in another currency
            # A span converts at the ECB rate of the day its price was first seen.
            per_hour = rates.convert(row["price_per_hour"], row["currency"], currency,
                                     row["valid_from"])
            per_gpu = rates.convert(row["price_per_gpu_hour"], row["currency"], currency,
                                    row["valid_from"])
            row.update(price_per_hour=per_hour.amount, price_per_gpu_hour=per_gpu.amount,
                       currency=currency, fx_from=per_hour.from_currency,
                       fx_rate=display_rate(per_hour.rate), fx_rate_date=per_hour.rate_date)
    if fmt == "table" and currency:
        from tracker.cli.commands.printing import round_for_people

        round_for_people(rows, ("price_per_hour", "price_per_gpu_hour"), rate=True)
    emit(rows, fmt, (list(rows[0]) + [k for k in ("fx_from", "fx_rate", "fx_rate_date")
                                      if k not in rows[0]]
                     if rows and currency and fmt == "csv" else None))


@click.command()
@format_option
def gpus(fmt: str) -> None:
    """Canonical GPU models with memory, dense peaks and links (data/gpus.json with the
    configuration's [gpus.<id>] figures)."""
    from tracker.answers.gpu_catalog import GPU_COLUMNS, gpu_rows

    rows = gpu_rows(listed=fmt != "json")
    emit(rows, fmt, GPU_COLUMNS if fmt == "table" else None)
