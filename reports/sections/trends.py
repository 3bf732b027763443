"""Trends: the cheapest price per provider and bucket, sampled daily over the trend window,
for the featured GPU classes (one chart each), with a one-line finding per bucket."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reports.sections.common import BUCKETS, epoch_ms, pct_change
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    import pandas as pd

    from tracker.answers.report_settings import ReportOptions

DAY = timedelta(days=1)
MAX_CHART_PROVIDERS = 6
# A featured class's chart keeps the big three clouds' on-demand lines even when cheaper
# providers would crowd them out: they are the reference a reader checks a price against.
BIG_THREE = ("aws", "azure", "gcp")


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


def trends(spans: pd.DataFrame, now: pd.DataFrame, window_start: datetime, as_of: datetime,
           options: ReportOptions) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    if spans.empty:
        return {"start": None, "end": as_of, "step": "P1D", "charts": []}
    first_data = datetime.fromtimestamp(int(spans["first_ms"].min()) / 1000, UTC)
    start = max(window_start, first_data)
    times = sample_times(start, as_of)
    sample_ms = np.array([epoch_ms(t) for t in times], dtype=np.int64)
    gpus = _chart_gpus(spans, now, options)
    spans = spans[spans["gpu"].isin(gpus)]

    # Each span covers the samples t with first_seen <= t < valid_to: expand it to those
    # sample indexes, then keep the cheapest span per (gpu, bucket, provider, sample), in
    # numpy over integer codes (the keys' strings are coded once, providers in name order).
    lo = np.searchsorted(sample_ms, spans["first_ms"].to_numpy(), side="left")
    valid_to = spans["valid_to_ms"].to_numpy()
    hi = np.where(valid_to < 0, len(sample_ms),
                  np.searchsorted(sample_ms, valid_to, side="left"))
    counts = np.maximum(hi - lo, 0)
    take = np.repeat(np.arange(len(spans)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    sample = np.repeat(lo, counts) + offsets
    gpu_code = np.array([gpus.index(g) for g in spans["gpu"].tolist()], dtype=np.int64)[take]
    bucket_code = np.array([BUCKETS.index(b) for b in spans["bucket"].tolist()],
                           dtype=np.int64)[take]
    provider_code, provider_names = pd.factorize(spans["provider"], sort=True)
    provider_code = provider_code.astype(np.int64)[take]
    rank = spans["rank"].to_numpy()[take]
    price = spans["price"].to_numpy()[take]
    providers = [str(p) for p in provider_names]
    n_samples, n_providers = len(times), len(providers)
    group = gpu_code * len(BUCKETS) + bucket_code  # a chart's bucket: g * len(BUCKETS) + b
    # Cheapest first, ties by provider name (stable: then as the spans were read).
    order = np.lexsort((provider_code, rank))
    per_provider = _first_of(order, ((group * n_providers + provider_code) * n_samples
                                     + sample)[order])
    overall = _first_of(order, (group * n_samples + sample)[order])
    pp_group, pp_provider = group[per_provider], provider_code[per_provider]
    all_group = group[overall]

    charts = []
    for g, gpu in enumerate(gpus):
        series, finding = [], {}
        providers_total = 0
        shown: dict[str, dict[str, Any]] = {}
        for b, bucket in enumerate(BUCKETS):
            here = pp_group == g * len(BUCKETS) + b
            if not here.any():
                continue
            rows, row_provider = per_provider[here], pp_provider[here]
            by_provider = {}
            for p in np.unique(row_provider).tolist():
                mine = rows[row_provider == p]
                by_provider[providers[p]] = {"sample": sample[mine], "rank": rank[mine],
                                             "price": price[mine]}
            providers_total = max(providers_total, len(by_provider))
            keep = BIG_THREE if bucket == "on_demand" and gpu in options.featured_gpus else ()
            chosen = _chart_providers(by_provider, len(times), keep)
            shown[bucket] = {"providers": len(by_provider), "lines": len(chosen),
                             "always": [p for p in keep if p in by_provider]}
            for provider in chosen:
                prices: list[Decimal | None] = [None] * len(times)
                for at, value in zip(by_provider[provider]["sample"].tolist(),
                                     by_provider[provider]["price"], strict=True):
                    prices[at] = value
                series.append({"provider": provider, "bucket": bucket, "prices": prices})
            cheapest = overall[all_group == g * len(BUCKETS) + b]
            cheapest = cheapest[np.argsort(sample[cheapest], kind="stable")]
            finding[bucket] = _finding(
                [(int(sample[i]), price[i], providers[provider_code[i]], int(rank[i]))
                 for i in cheapest.tolist()], times)
        charts.append({
            "chart_id": f"trend-{gpu}", "gpu": gpu, "gpu_name": gpu_name(gpu),
            "start": times[0], "end": times[-1], "series": series, "finding": finding,
            "providers_total": providers_total, "shown": shown,
            "lines_note": _lines_note(shown),
        })
    return {"start": times[0], "end": as_of, "step": "P1D", "times": times, "charts": charts}


def _lines_note(shown: dict[str, dict[str, Any]]) -> str | None:
    """Which providers have a line, per bucket, when not all do: 'On-demand: 6 of 10 providers
    (aws, azure, gcp always, then the cheapest at the window's end); spot: 6 of 9 (the
    cheapest at the window's end).' None when every provider has its line."""
    parts = []
    for bucket, label in (("on_demand", "on-demand"), ("spot", "spot")):
        entry = shown.get(bucket)
        if not entry or entry["lines"] >= entry["providers"]:
            continue
        rule = "the cheapest at the window's end"
        if entry["always"]:
            rule = f"{', '.join(entry['always'])} always, then {rule}"
        parts.append(f"{label}: {entry['lines']} of {entry['providers']} providers ({rule})")
    if not parts:
        return None
    text = "; ".join(parts)
    return f"Lines shown, {text[0].lower()}{text[1:]}."


def _chart_providers(by_provider: dict[str, Any], n_samples: int,
                     keep: tuple[str, ...] = ()) -> list[str]:
    """The providers worth a line: those in `keep` that have prices, then the cheapest at
    the end of the window (then by average rank), MAX_CHART_PROVIDERS in all. A provider's
    rows: its "sample" and "rank" columns (arrays, or a frame's)."""
    import numpy as np

    def key(item: tuple[str, Any]) -> tuple:
        provider, rows = item
        ranks = np.asarray(rows["rank"])
        at_end = ranks[np.asarray(rows["sample"]) == n_samples - 1]
        end_rank = int(at_end.min()) if at_end.size else 1 << 62
        return (end_rank, float(ranks.mean()), provider)

    kept = [p for p in keep if p in by_provider]
    ranked = [p for p, _ in sorted(by_provider.items(), key=key) if p not in kept]
    return sorted(kept + ranked[:max(0, MAX_CHART_PROVIDERS - len(kept))])


def _first_of(order: Any, keys: Any) -> Any:
    """The rows (`order`'s entries) first in `order` for each distinct key (`keys` in that
    order), kept in that order: DataFrame.drop_duplicates on sorted rows."""
    import numpy as np

    _, first = np.unique(keys, return_index=True)
    return order[np.sort(first)]


def _finding(cheapest: list[tuple[int, Any, str, int]],
             times: list[datetime]) -> dict[str, Any] | None:
    """From the cheapest (sample, price, provider, rank) of each sample, in sample order."""
    if not cheapest:
        return None
    first, last = cheapest[0], cheapest[-1]
    low = min(cheapest, key=lambda row: (row[3], row[0]))
    end_price = last[1] if last[0] == len(times) - 1 else None
    return {
        "start_time": times[first[0]], "start_price": first[1],
        "start_provider": first[2],
        "end_time": times[-1], "end_price": end_price,
        "end_provider": last[2] if end_price is not None else None,
        "change_pct": pct_change(end_price, first[1]),
        "low_price": low[1], "low_time": times[low[0]],
        "low_provider": low[2],
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
    return [str(g) for g, _ in ranked if g in present][:MAX_CHART_PROVIDERS]
