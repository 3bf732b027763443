"""Build the weekly report document: one versioned JSON-ready dict computed from the store.

Everything the HTML, the mail and the CSV show is computed here, once; the renderers only
format. The document is deterministic: the same week built twice from the same data gives
the same bytes (rows sorted on full keys, no clock unless `generated_at` is passed in).

Money stays Decimal. pandas does the grouping and joining with Decimal `object` columns;
where a minimum over many rows is needed, prices are ranked exactly (sorted unique Decimals
mapped to integers) instead of being converted to float.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reports.settings import report_settings
from reports.weeks import Week, default_week
from tracker.errors import InvalidInput

if TYPE_CHECKING:
    import pandas as pd

    from tracker.config import Config
    from tracker.db import Database
    from tracker.store import PriceRow

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DOCUMENT_KIND = "gpu-tracker.weekly-report"
# Interruptible prices: cloud spot and marketplace minimum bids (Vast.ai) are one bucket.
BUCKET_OF = {"on-demand": "on_demand", "spot": "spot", "bid": "spot"}
BUCKETS = ("on_demand", "spot")
DAY = timedelta(days=1)
PRICE_COLUMNS = (
    "gpu", "gpu_name", "provider", "region", "zone", "instance_type", "variant", "gpu_count",
    "category", "price_per_hour", "price_per_gpu_hour", "currency",
    "previous_price_per_gpu_hour", "change_pct", "first_seen", "last_seen", "source",
)


@dataclass(frozen=True)
class ReportOptions:
    currency: str = "USD"
    featured_gpus: tuple[str, ...] = ()
    trend_weeks: int = 12
    movers: int = 10
    spot_rows: int = 25
    stale_after_hours: float = 48.0
    timezone: str = "UTC"
    workloads: tuple[dict[str, Any], ...] = ()
    economics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> ReportOptions:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        from tracker.money import check_currency

        settings = report_settings(config)
        timezone = str(settings["timezone"] or "UTC")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(f"[report] timezone {timezone!r} is not an IANA time zone "
                               "(e.g. Europe/Berlin)") from None
        return cls(
            currency=check_currency(str(settings["currency"])),
            featured_gpus=tuple(settings["featured_gpus"]),
            trend_weeks=int(settings["trend_weeks"]), movers=int(settings["movers"]),
            spot_rows=int(settings["spot_rows"]),
            stale_after_hours=float(config.get("refresh", "stale_after_hours", 48.0) or 48.0),
            timezone=timezone,
            workloads=tuple(dict(w) for w in settings["workloads"] or ()),
            economics=dict(config["economics"] or {}),
        )


# --------------------------------------------------------------------------------------------
# Entry point


def resolve_week(db: Database, week: Week | str | None, now: datetime) -> Week:
    if isinstance(week, Week):
        return week
    if week:
        return Week.parse(week)
    return default_week(now, latest_observation(db))


def latest_observation(db: Database) -> datetime | None:
    from sqlalchemy import func, select

    from tracker.models import PriceSpan

    with db.engine.connect() as conn:
        return conn.execute(select(func.max(PriceSpan.__table__.c.last_seen))).scalar()


def build_report(
    db: Database, config: Config, week: Week | str | None = None, *, now: datetime,
    generated_at: datetime | None = None, options: ReportOptions | None = None,
) -> dict[str, Any]:
    """The report document for `week` (default: the newest finished week with data).

    `now` decides whether the week is finished (then the report is as of its end, Sunday
    24:00 UTC) or still running (as of `now`); it does not appear in the document.
    """
    if now.tzinfo is None:
        raise InvalidInput("now must be timezone-aware (UTC)")
    options = options or ReportOptions.from_config(config)
    week = resolve_week(db, week, now)
    as_of = week.as_of(now)
    previous_as_of = as_of - timedelta(days=7)
    window_start = as_of - timedelta(days=7 * options.trend_weeks)

    from tracker.store import price_rows

    rows_now = price_rows(db, as_of=as_of)
    rows_prev = price_rows(db, as_of=previous_as_of)
    now_frame = _price_frame(rows_now)
    prev_frame = _price_frame(rows_prev)
    in_currency_now = now_frame[now_frame["currency"] == options.currency]
    in_currency_prev = prev_frame[prev_frame["currency"] == options.currency]

    spans = load_spans(db, since=window_start, until=as_of, currency=options.currency)
    key_figures = _key_figures(in_currency_now, in_currency_prev, options)
    new_lows = _new_lows(key_figures, spans, week.start, window_start, options)
    trends = _trends(spans, in_currency_now, window_start, as_of, options)
    movers = _movers(in_currency_now, in_currency_prev, options)
    from tracker.store import interruption_facts

    bands = {(f.provider, f.region, f.instance_type): f
             for f in interruption_facts(db, as_of=as_of) if f.os.lower() == "linux"}
    spot = _spot(in_currency_now, bands, options)
    quality = _data_quality(db, week, as_of, now_frame, options)

    from reports.recommend import recommendations

    recs = recommendations(options.workloads, rows_now, rows_prev, options, bands)
    prices = _prices(now_frame, prev_frame)

    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": DOCUMENT_KIND,
        "week": str(week),
        "period": {
            "week_start": week.start, "week_end": week.end, "as_of": as_of,
            "previous_as_of": previous_as_of, "complete": week.is_complete(now),
            "trend_start": trends["start"], "timezone": options.timezone,
        },
        "generated_at": generated_at,
        "currency": options.currency,
        "featured_gpus": list(options.featured_gpus),
        "summary": _summary(key_figures, new_lows, recs, quality, movers, as_of,
                            len(rows_now)),
        "key_figures": key_figures,
        "new_lows": new_lows,
        "trends": trends,
        "movers": movers,
        "spot": spot,
        "recommendations": recs,
        "data_quality": quality,
        "prices": prices,
    }
    return normalize(document)


def normalize(document: dict[str, Any]) -> dict[str, Any]:
    """The JSON form: Decimals as exact strings, datetimes as ISO UTC `Z`."""
    from tracker.output import to_jsonable

    return to_jsonable(document)


def to_json(document: dict[str, Any]) -> str:
    """Canonical serialization (sorted keys) so equal documents are equal bytes."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------
# Frames and helpers


def _gpu_order() -> dict[str, int]:
    from tracker.gpus import gpu_table

    return {gpu_id: i for i, gpu_id in enumerate(gpu_table())}


def gpu_name(gpu_id: str) -> str:
    from tracker.gpus import gpu_table

    gpu = gpu_table().get(gpu_id)
    return gpu.name if gpu is not None else gpu_id


def _price_frame(rows: Sequence[PriceRow]) -> pd.DataFrame:
    import pandas as pd

    columns = ["offer_id", "source", "provider", "region", "zone", "instance_type", "variant",
               "gpu", "gpu_count", "category", "price_per_hour", "price_per_gpu_hour",
               "currency", "observed_at", "last_seen"]
    frame = pd.DataFrame([[getattr(r, c) for c in columns] for r in rows], columns=columns)
    # price_rows() returns rows cheapest first on full keys: keep that order as the exact rank.
    frame["rank"] = range(len(frame))
    frame["bucket"] = frame["category"].map(BUCKET_OF)
    return frame


def exact_rank(values: Iterable[Decimal]) -> list[int]:
    """Integer ranks that order Decimals exactly (equal amounts share a rank)."""
    values = list(values)
    order = {value: i for i, value in enumerate(sorted(set(values)))}
    return [order[v] for v in values]


def pct_change(new: Decimal | None, old: Decimal | None) -> float | None:
    """Percent change rounded to 0.01; None when there is no base (infracost leaves it blank)."""
    if new is None or old is None or old == 0:
        return None
    return float(((new - old) / old * 100).quantize(Decimal("0.01")))


def _offer_json(row: Any, price_key: str = "price_per_gpu_hour") -> dict[str, Any]:
    return {
        "offer_id": int(row.offer_id), "provider": row.provider, "region": row.region,
        "zone": row.zone, "instance_type": row.instance_type, "variant": row.variant,
        "gpu": row.gpu, "gpu_name": gpu_name(row.gpu), "gpu_count": float(row.gpu_count),
        "category": row.category, "price": getattr(row, price_key),
        "price_per_hour": row.price_per_hour, "source": row.source,
    }


# --------------------------------------------------------------------------------------------
# Key figures and new lows


def _cheapest(frame: pd.DataFrame) -> dict[tuple[str, str], Any]:
    """The cheapest row per (GPU, bucket); frames are sorted cheapest first already."""
    if frame.empty:
        return {}
    best = frame.dropna(subset=["bucket"]).drop_duplicates(["gpu", "bucket"], keep="first")
    counts = frame.groupby(["gpu", "bucket"]).size().to_dict()
    return {(r.gpu, r.bucket): (r, int(counts[(r.gpu, r.bucket)]))
            for r in best.itertuples(index=False)}


def _key_figures(now: pd.DataFrame, prev: pd.DataFrame,
                 options: ReportOptions) -> list[dict[str, Any]]:
    best_now, best_prev = _cheapest(now), _cheapest(prev)
    order = _gpu_order()
    gpus = sorted({g for g, _ in best_now} | {g for g, _ in best_prev},
                  key=lambda g: (order.get(g, len(order)), g))
    figures = []
    for gpu in gpus:
        entry: dict[str, Any] = {"gpu": gpu, "gpu_name": gpu_name(gpu),
                                 "featured": gpu in options.featured_gpus}
        for bucket in BUCKETS:
            current, previous = best_now.get((gpu, bucket)), best_prev.get((gpu, bucket))
            if current is None and previous is None:
                entry[bucket] = None
                continue
            cell: dict[str, Any] = {"now": None, "previous": None, "change": None,
                                    "change_pct": None, "offers": 0}
            if current is not None:
                cell["now"] = _offer_json(current[0])
                cell["offers"] = current[1]
            if previous is not None:
                cell["previous"] = _offer_json(previous[0])
            if current is not None and previous is not None:
                new, old = current[0].price_per_gpu_hour, previous[0].price_per_gpu_hour
                cell["change"] = new - old
                cell["change_pct"] = pct_change(new, old)
            entry[bucket] = cell
        figures.append(entry)
    return figures


def _new_lows(key_figures: list[dict[str, Any]], spans: pd.DataFrame, week_start: datetime,
              window_start: datetime, options: ReportOptions) -> list[dict[str, Any]]:
    """Cheapest prices now below every price seen in the trend window before this week."""
    if spans.empty:
        return []
    start_ms = _ms(week_start)
    before = spans[spans["first_ms"] < start_ms]
    if before.empty:
        return []
    lows = before.sort_values("rank", kind="stable").drop_duplicates(["gpu", "bucket"])
    low_of = {(r.gpu, r.bucket): r for r in lows.itertuples(index=False)}
    result = []
    for entry in key_figures:
        for bucket in BUCKETS:
            cell = entry.get(bucket)
            if not cell or not cell["now"]:
                continue
            low = low_of.get((entry["gpu"], bucket))
            if low is not None and cell["now"]["price"] < low.price:
                result.append({
                    "gpu": entry["gpu"], "gpu_name": entry["gpu_name"], "bucket": bucket,
                    "category": cell["now"]["category"], "price": cell["now"]["price"],
                    "provider": cell["now"]["provider"], "region": cell["now"]["region"],
                    "instance_type": cell["now"]["instance_type"],
                    "previous_low": low.price, "previous_low_provider": low.provider,
                    "window_start": window_start, "window_weeks": options.trend_weeks,
                })
    return result


# --------------------------------------------------------------------------------------------
# Trends


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _epoch_ms_sql(dialect: str, column: str) -> str:
    if dialect == "postgresql":
        return f"CAST(ROUND(EXTRACT(EPOCH FROM {column}) * 1000) AS BIGINT)"
    return f"CAST(ROUND((julianday({column}) - 2440587.5) * 86400000) AS INTEGER)"


def load_spans(db: Database, *, since: datetime, until: datetime,
               currency: str) -> pd.DataFrame:
    """Every price span of on-demand/spot/bid offers overlapping [since, until].

    Columns: offer_id, gpu, bucket, category, provider, region, instance_type, price (per
    GPU-hour, Decimal), rank (exact price order), first_ms, valid_to_ms (epoch ms; -1 = open).
    """
    import pandas as pd
    from sqlalchemy import String, literal_column, or_, select, type_coerce

    from tracker.models import Offer, PriceSpan
    from tracker.store import per_gpu

    o, s = Offer.__table__, PriceSpan.__table__
    dialect = db.dialect
    first_ms = literal_column(_epoch_ms_sql(dialect, "price_span.first_seen"))
    valid_to_ms = literal_column(_epoch_ms_sql(dialect, "price_span.valid_to"))
    query = (
        select(o.c.id, o.c.gpu_id, o.c.category, o.c.provider, o.c.region, o.c.instance_type,
               o.c.gpu_count, type_coerce(s.c.price_per_hour, String), first_ms, valid_to_ms)
        .select_from(o.join(s, s.c.offer_id == o.c.id))
        .where(o.c.category.in_(tuple(BUCKET_OF)), s.c.currency == currency,
               s.c.first_seen <= until, or_(s.c.valid_to.is_(None), s.c.valid_to > since))
    )
    with db.engine.connect() as conn:
        raw = conn.execute(query).fetchall()
    columns = ["offer_id", "gpu", "category", "provider", "region", "instance_type",
               "gpu_count", "price_per_hour", "first_ms", "valid_to_ms"]
    # Column lists, not Row objects: pandas probes each Row for attributes otherwise.
    data = list(zip(*raw, strict=True)) if raw else [[] for _ in columns]
    frame = pd.DataFrame(dict(zip(columns, data, strict=True)))
    if frame.empty:
        frame["price"] = []
        frame["rank"] = []
        frame["bucket"] = []
        return frame
    cache: dict[tuple[str, float], Decimal] = {}

    def price_of(text: Any, count: float) -> Decimal:
        key = (str(text), count)
        value = cache.get(key)
        if value is None:
            value = cache[key] = per_gpu(Decimal(str(text)), count)
        return value

    prices = [price_of(p, c) for p, c in zip(data[7], data[6], strict=True)]
    frame["price"] = prices
    frame["rank"] = exact_rank(prices)
    frame["bucket"] = frame["category"].map(BUCKET_OF)
    frame["valid_to_ms"] = frame["valid_to_ms"].fillna(-1).astype("int64")
    frame["first_ms"] = frame["first_ms"].astype("int64")
    return frame


def sample_times(start: datetime, as_of: datetime) -> list[datetime]:
    """Daily instants 00:00 UTC from `start`, plus `as_of` when it is not on a day boundary."""
    first = start.replace(hour=0, minute=0, second=0, microsecond=0)
    if first < start:
        first += DAY
    times = []
    moment = first
    while moment <= as_of:
        times.append(moment)
        moment += DAY
    if not times or times[-1] != as_of:
        times.append(as_of)
    return times


def _trends(spans: pd.DataFrame, now: pd.DataFrame, window_start: datetime, as_of: datetime,
            options: ReportOptions) -> dict[str, Any]:
    import numpy as np

    if spans.empty:
        return {"start": None, "end": as_of, "step": "P1D", "charts": []}
    first_data = datetime.fromtimestamp(int(spans["first_ms"].min()) / 1000, UTC)
    start = max(window_start, first_data)
    times = sample_times(start, as_of)
    sample_ms = np.array([_ms(t) for t in times], dtype=np.int64)
    gpus = _chart_gpus(spans, now, options)
    spans = spans[spans["gpu"].isin(gpus)]

    # Each span covers the samples t with first_seen <= t < valid_to: expand it to those
    # sample indexes, then keep the cheapest span per (gpu, bucket, provider, sample).
    lo = np.searchsorted(sample_ms, spans["first_ms"].to_numpy(), side="left")
    valid_to = spans["valid_to_ms"].to_numpy()
    hi = np.where(valid_to < 0, len(sample_ms),
                  np.searchsorted(sample_ms, valid_to, side="left"))
    counts = np.maximum(hi - lo, 0)
    take = np.repeat(np.arange(len(spans)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    expanded = spans.iloc[take][["gpu", "bucket", "provider", "price", "rank"]].copy()
    expanded["sample"] = np.repeat(lo, counts) + offsets
    expanded = expanded.sort_values(["rank", "provider"], kind="stable")
    per_provider = expanded.drop_duplicates(["gpu", "bucket", "provider", "sample"])
    overall = expanded.drop_duplicates(["gpu", "bucket", "sample"])

    charts = []
    for gpu in gpus:
        series, finding = [], {}
        providers_total = 0
        for bucket in BUCKETS:
            rows = per_provider[(per_provider["gpu"] == gpu) & (per_provider["bucket"] == bucket)]
            if rows.empty:
                continue
            by_provider = {p: g for p, g in rows.groupby("provider", sort=True)}
            providers_total = max(providers_total, len(by_provider))
            for provider in _chart_providers(by_provider, len(times)):
                prices: list[Decimal | None] = [None] * len(times)
                for sample, price in zip(by_provider[provider]["sample"],
                                         by_provider[provider]["price"], strict=True):
                    prices[int(sample)] = price
                series.append({"provider": provider, "bucket": bucket, "prices": prices})
            cheapest = overall[(overall["gpu"] == gpu) & (overall["bucket"] == bucket)]
            finding[bucket] = _finding(cheapest.sort_values("sample"), times)
        charts.append({
            "chart_id": f"trend-{gpu}", "gpu": gpu, "gpu_name": gpu_name(gpu),
            "start": times[0], "end": times[-1], "series": series, "finding": finding,
            "providers_total": providers_total,
        })
    return {"start": times[0], "end": as_of, "step": "P1D", "times": times, "charts": charts}


MAX_CHART_PROVIDERS = 6


def _chart_providers(by_provider: dict[str, Any], n_samples: int) -> list[str]:
    """The providers worth a line: cheapest at the end of the window (then by average rank)."""
    def key(item: tuple[str, Any]) -> tuple:
        provider, rows = item
        last = rows[rows["sample"] == n_samples - 1]
        end_rank = int(last["rank"].min()) if not last.empty else 1 << 62
        return (end_rank, float(rows["rank"].mean()), provider)

    ranked = sorted(by_provider.items(), key=key)
    return sorted(p for p, _ in ranked[:MAX_CHART_PROVIDERS])


def _finding(cheapest: pd.DataFrame, times: list[datetime]) -> dict[str, Any] | None:
    if cheapest.empty:
        return None
    first, last = cheapest.iloc[0], cheapest.iloc[-1]
    low = cheapest.sort_values(["rank", "sample"], kind="stable").iloc[0]
    end_price = last["price"] if int(last["sample"]) == len(times) - 1 else None
    return {
        "start_time": times[int(first["sample"])], "start_price": first["price"],
        "start_provider": first["provider"],
        "end_time": times[-1], "end_price": end_price,
        "end_provider": last["provider"] if end_price is not None else None,
        "change_pct": pct_change(end_price, first["price"]),
        "low_price": low["price"], "low_time": times[int(low["sample"])],
        "low_provider": low["provider"],
    }


def _chart_gpus(spans: pd.DataFrame, now: pd.DataFrame, options: ReportOptions) -> list[str]:
    present = set(spans["gpu"].unique())
    featured = [g for g in options.featured_gpus if g in present]
    if featured:
        return featured
    # Nothing featured has data (e.g. other GPUs in a demo): the six most offered classes.
    counts = now.groupby("gpu").size() if not now.empty else None
    if counts is None or counts.empty:
        return sorted(present)[:MAX_CHART_PROVIDERS]
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [g for g, _ in ranked if g in present][:MAX_CHART_PROVIDERS]


# --------------------------------------------------------------------------------------------
# Movers


def _movers(now: pd.DataFrame, prev: pd.DataFrame, options: ReportOptions) -> dict[str, Any]:
    cols = ["offer_id", "source", "provider", "region", "zone", "instance_type", "variant",
            "gpu", "gpu_count", "category", "price_per_hour", "price_per_gpu_hour"]
    merged = now[cols].merge(
        prev[["offer_id", "price_per_gpu_hour"]].rename(
            columns={"price_per_gpu_hour": "previous"}),
        on="offer_id", how="outer", indicator=True)
    compared = merged[merged["_merge"] == "both"].copy()
    new_ids = set(merged.loc[merged["_merge"] == "left_only", "offer_id"])
    removed_ids = set(merged.loc[merged["_merge"] == "right_only", "offer_id"])
    if compared.empty:
        compared["change"] = []
        compared["change_pct"] = []
    else:
        compared["change"] = [a - b for a, b in zip(
            compared["price_per_gpu_hour"], compared["previous"], strict=True)]
        compared["change_pct"] = [pct_change(a, b) for a, b in zip(
            compared["price_per_gpu_hour"], compared["previous"], strict=True)]
    compared["sign"] = [(c > 0) - (c < 0) for c in compared["change"]]

    def offers(frame: pd.DataFrame, descending: bool) -> list[dict[str, Any]]:
        rows = sorted(
            frame.itertuples(index=False),
            key=lambda r: ((-r.change_pct if descending else r.change_pct),
                           (-r.change if descending else r.change),
                           r.provider, r.region, r.zone, r.instance_type, r.variant,
                           r.category, r.offer_id))
        return [{**_offer_json(r), "previous_price": r.previous, "change": r.change,
                 "change_pct": r.change_pct} for r in rows[:options.movers]]

    increases = offers(compared[compared["sign"] > 0], descending=True)
    decreases = offers(compared[compared["sign"] < 0], descending=False)

    prev_by_provider = prev.groupby("provider").size().to_dict() if not prev.empty else {}
    removed_by_provider = (prev[prev["offer_id"].isin(removed_ids)].groupby("provider").size()
                           .to_dict() if removed_ids else {})
    new_by_provider = (now[now["offer_id"].isin(new_ids)].groupby("provider").size().to_dict()
                       if new_ids else {})
    by_provider = []
    providers = sorted(set(now["provider"]) | set(prev_by_provider))
    for provider in providers:
        rows = compared[compared["provider"] == provider]
        by_provider.append({
            "provider": provider, **_move_counts(rows),
            "new": int(new_by_provider.get(provider, 0)),
            "removed": int(removed_by_provider.get(provider, 0)),
        })
    by_region = []
    for (provider, region), rows in compared.groupby(["provider", "region"], sort=True):
        counts = _move_counts(rows)
        if counts["up"] or counts["down"]:
            by_region.append({"provider": provider, "region": region, **counts})
    by_region.sort(key=lambda r: (-abs(r["mean_change_pct"] or 0), r["provider"], r["region"]))
    return {
        "compared": len(compared), "changed": int((compared["sign"] != 0).sum()),
        "new_offers": len(new_ids), "removed_offers": len(removed_ids),
        "increases": increases, "decreases": decreases,
        "by_provider": by_provider, "by_region": by_region[:options.movers],
    }


def _move_counts(rows: pd.DataFrame) -> dict[str, Any]:
    # The mean of the exact relative changes, rounded once at the end.
    ratios = [(new - old) / old for new, old in zip(
        rows["price_per_gpu_hour"], rows["previous"], strict=True) if old]
    mean = (float((sum(ratios) / len(ratios) * 100).quantize(Decimal("0.01")))
            if ratios else None)
    return {
        "compared": len(rows), "up": int((rows["sign"] > 0).sum()),
        "down": int((rows["sign"] < 0).sum()), "unchanged": int((rows["sign"] == 0).sum()),
        "mean_change_pct": mean,
    }


# --------------------------------------------------------------------------------------------
# Spot


def _spot(now: pd.DataFrame, bands: dict[tuple[str, str, str], Any],
          options: ReportOptions) -> dict[str, Any]:
    spot = now[now["bucket"] == "spot"]
    on_demand = now[now["category"] == "on-demand"]
    # The matching on-demand price: same provider, region, instance type and variant, any
    # zone (AWS quotes spot per zone, on-demand per region); the cheapest if several.
    od_best: dict[tuple, Any] = {}
    for row in on_demand.itertuples(index=False):
        od_best.setdefault((row.source, row.provider, row.region, row.instance_type,
                            row.variant), row)
    order = _gpu_order()
    rows = []
    for row in spot.itertuples(index=False):
        od = od_best.get((row.source, row.provider, row.region, row.instance_type, row.variant))
        fact = bands.get((row.provider, row.region, row.instance_type))
        discount = None
        if od is not None and od.price_per_gpu_hour > 0:
            discount = float(((1 - row.price_per_gpu_hour / od.price_per_gpu_hour) * 100)
                             .quantize(Decimal("0.01")))
        rows.append({
            **_offer_json(row),
            "on_demand_price": od.price_per_gpu_hour if od is not None else None,
            "discount_pct": discount,
            "interruption": None if fact is None else {
                "band": fact.band, "label": fact.band_label, "min_pct": fact.min_pct,
                "max_pct": fact.max_pct, "as_of": fact.as_of},
        })
    rows.sort(key=lambda r: (order.get(r["gpu"], len(order)), r["gpu"],
                             -(r["discount_pct"] if r["discount_pct"] is not None else -1e9),
                             r["price"], r["provider"], r["region"], r["zone"],
                             r["instance_type"], r["variant"], r["offer_id"]))
    by_gpu = []
    for gpu in sorted({r["gpu"] for r in rows}, key=lambda g: (order.get(g, len(order)), g)):
        discounts = sorted(r["discount_pct"] for r in rows
                           if r["gpu"] == gpu and r["discount_pct"] is not None)
        by_gpu.append({
            "gpu": gpu, "gpu_name": gpu_name(gpu),
            "offers": sum(1 for r in rows if r["gpu"] == gpu),
            "matched": len(discounts),
            "median_discount_pct": _median(discounts),
            "max_discount_pct": discounts[-1] if discounts else None,
        })
    return {"offers": rows, "by_gpu": by_gpu, "display_limit": options.spot_rows,
            "with_interruption_band": sum(1 for r in rows if r["interruption"])}


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    if len(values) % 2:
        return values[mid]
    return round((values[mid - 1] + values[mid]) / 2, 2)


# --------------------------------------------------------------------------------------------
# Data quality


def _data_quality(db: Database, week: Week, as_of: datetime, now: pd.DataFrame,
                  options: ReportOptions) -> dict[str, Any]:
    from sqlalchemy import func, select

    from tracker.models import IngestRun, JobRun, RejectedRow

    runs_t, jobs_t, rej_t = IngestRun.__table__, JobRun.__table__, RejectedRow.__table__
    with db.engine.connect() as conn:
        week_runs = conn.execute(
            select(runs_t).where(runs_t.c.started_at >= week.start, runs_t.c.started_at < as_of)
            .order_by(runs_t.c.started_at, runs_t.c.id)).fetchall()
        last_ok = dict(conn.execute(
            select(runs_t.c.source, func.max(runs_t.c.started_at))
            .where(runs_t.c.status == "ok", runs_t.c.started_at < as_of)
            .group_by(runs_t.c.source)).fetchall())
        rejected = conn.execute(
            select(rej_t.c.source, rej_t.c.reason, func.count())
            .where(rej_t.c.observed_at >= week.start, rej_t.c.observed_at < as_of)
            .group_by(rej_t.c.source, rej_t.c.reason)).fetchall()
        job_rows = conn.execute(
            select(jobs_t).where(jobs_t.c.started_at >= week.start, jobs_t.c.started_at < as_of)
            .order_by(jobs_t.c.started_at, jobs_t.c.id)).fetchall()

    newest: dict[str, datetime] = {}
    offers: dict[str, int] = {}
    for row in now.itertuples(index=False):
        # A price still valid at as_of was confirmed at last_seen; later sightings count as
        # "up to date at as_of".
        seen = min(row.last_seen, as_of)
        if row.source not in newest or seen > newest[row.source]:
            newest[row.source] = seen
        offers[row.source] = offers.get(row.source, 0) + 1

    stale_limit = as_of - timedelta(hours=options.stale_after_hours)
    sources = []
    for name in sorted(set(newest) | {r.source for r in week_runs} | set(last_ok)):
        runs = [r for r in week_runs if r.source == name]
        last = runs[-1] if runs else None
        newest_at = newest.get(name)
        sources.append({
            "source": name, "runs": len(runs),
            "ok": sum(1 for r in runs if r.status == "ok"),
            "failed": sum(1 for r in runs if r.status == "failed"),
            "skipped": sum(1 for r in runs if r.status == "skipped"),
            "rejected": sum(r.rejected or 0 for r in runs),
            "last_run_at": last.started_at if last else None,
            "last_status": last.status if last else None,
            "last_error": last.error if last is not None and last.status != "ok" else None,
            "last_success_at": last_ok.get(name),
            "offers": offers.get(name, 0),
            "newest_price_at": newest_at,
            # A source that never delivered a price is "failed", not "stale".
            "stale": (newest_at < stale_limit) if newest_at is not None else name in last_ok,
        })
    rejected_rows = sorted(({"source": s, "reason": r, "count": int(n)} for s, r, n in rejected),
                           key=lambda x: (-x["count"], x["source"], x["reason"]))
    jobs = []
    for name in sorted({r.job for r in job_rows}):
        runs = [r for r in job_rows if r.job == name]
        jobs.append({
            "job": name, "runs": len(runs),
            "ok": sum(1 for r in runs if r.status == "ok"),
            "failed": sum(1 for r in runs if r.status not in ("ok", "running", "skipped")),
            "last_status": runs[-1].status, "last_started_at": runs[-1].started_at,
            "last_error": runs[-1].error if runs[-1].status != "ok" else None,
        })
    other_currency = now[now["currency"] != options.currency]
    return {
        "as_of": as_of, "stale_after_hours": options.stale_after_hours,
        "sources": sources,
        "refreshed": [s["source"] for s in sources if s["ok"]],
        "failed": [s["source"] for s in sources if s["failed"]],
        "stale": [s["source"] for s in sources if s["stale"]],
        "rejected_total": sum(x["count"] for x in rejected_rows),
        "rejected": rejected_rows[:10],
        "jobs": jobs,
        "offers_total": len(now),
        "offers_other_currency": len(other_currency),
        "other_currencies": sorted(set(other_currency["currency"])),
    }


# --------------------------------------------------------------------------------------------
# The week's prices (the CSV)


def _prices(now: pd.DataFrame, prev: pd.DataFrame) -> dict[str, Any]:
    previous = {(r.offer_id, r.currency): r.price_per_gpu_hour
                for r in prev.itertuples(index=False)}
    order = _gpu_order()
    rows = []
    for r in now.itertuples(index=False):
        before = previous.get((r.offer_id, r.currency))
        rows.append({
            "gpu": r.gpu, "gpu_name": gpu_name(r.gpu), "provider": r.provider,
            "region": r.region, "zone": r.zone, "instance_type": r.instance_type,
            "variant": r.variant, "gpu_count": float(r.gpu_count), "category": r.category,
            "price_per_hour": r.price_per_hour, "price_per_gpu_hour": r.price_per_gpu_hour,
            "currency": r.currency, "previous_price_per_gpu_hour": before,
            "change_pct": pct_change(r.price_per_gpu_hour, before),
            "first_seen": r.observed_at, "last_seen": r.last_seen, "source": r.source,
            "_rank": r.rank,
        })
    rows.sort(key=lambda x: (order.get(x["gpu"], len(order)), x["gpu"], x["category"],
                             x["currency"], x["_rank"]))
    for row in rows:
        del row["_rank"]
    return {"columns": list(PRICE_COLUMNS), "count": len(rows), "rows": rows}


# --------------------------------------------------------------------------------------------
# Executive summary


def _summary(key_figures: list[dict[str, Any]], new_lows: list[dict[str, Any]],
             recs: dict[str, Any], quality: dict[str, Any], movers: dict[str, Any],
             as_of: datetime, n_prices: int) -> dict[str, Any]:
    moves = []
    for entry in key_figures:
        for bucket in BUCKETS:
            cell = entry.get(bucket)
            if cell and cell["change"] is not None:
                moves.append({
                    "kind": "move", "gpu": entry["gpu"], "gpu_name": entry["gpu_name"],
                    "bucket": bucket, "category": cell["now"]["category"],
                    "price": cell["now"]["price"], "previous_price": cell["previous"]["price"],
                    "provider": cell["now"]["provider"], "change": cell["change"],
                    "change_pct": cell["change_pct"], "featured": entry["featured"],
                })
    changed = [m for m in moves if m["change"] != 0]
    changed.sort(key=lambda m: (-abs(m["change_pct"] or 0), not m["featured"], m["gpu"],
                                m["bucket"]))
    headline = {
        "kind": "headline", "as_of": as_of,
        "classes_priced": sum(1 for e in key_figures for b in BUCKETS
                              if e.get(b) and e[b]["now"]),
        "classes_down": sum(1 for m in moves if m["change"] < 0),
        "classes_up": sum(1 for m in moves if m["change"] > 0),
        "classes_flat": sum(1 for m in moves if m["change"] == 0),
        "biggest": changed[0] if changed else None,
        "offers_changed": movers["changed"], "offers_compared": movers["compared"],
    }
    items: list[dict[str, Any]] = []
    if n_prices == 0:
        items.append({"kind": "no_data"})
    items.extend(changed[:3])
    items.extend({"kind": "new_low", **low} for low in new_lows[:3])
    items.extend(item for item in recs.get("changes", []))
    if quality["failed"] or quality["stale"]:
        items.append({"kind": "data_quality", "failed": len(quality["failed"]),
                      "failed_sources": quality["failed"], "stale": len(quality["stale"]),
                      "stale_sources": quality["stale"]})
    return {"headline": headline, "items": items}
