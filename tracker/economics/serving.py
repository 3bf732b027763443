"""Serving economics: cost per million tokens, per request and per month, and the API breakeven.

Pure and exact: prices are Decimal; a modelled throughput (a float, physics) crosses into
money once, through its shortest repr (`units.dec`), as tokens per hour. Then

    cost per million output tokens = price per GPU-hour × GPUs ÷ output tokens per hour × 10⁶

and the other figures follow from the same tokens per hour. Self-hosting against an API:
the API bills `prompt × p_in + output × p_out` per request; a deployment is paid by the hour
whether busy or not, so the smallest deployment (one replica of the chosen plan, all day)
is cheaper than the API above the daily output volume where the API bill reaches its daily
cost — provided the replica's own cost per token, when busy, is below the API's.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from tracker.economics.units import dec, positive

MILLION = Decimal(1_000_000)
SECONDS_PER_HOUR = Decimal(3600)
HOURS_PER_DAY = Decimal(24)
PER_TOKEN_PLACES = Decimal("0.000001")  # $/M tokens and $/request keep micro-dollars


@dataclass(frozen=True, slots=True)
class ServingCost:
    """Exact money figures of one deployment at its operating point (unrounded)."""

    price_per_gpu_hour: Decimal
    gpus: int
    output_tokens_per_hour: Decimal
    cost_per_hour: Decimal
    cost_per_million_output_tokens: Decimal
    cost_per_million_tokens: Decimal
    cost_per_request: Decimal
    cost_per_month: Decimal | None  # with a load: the GPUs it needs, every hour of the month
    cost_per_million_output_tokens_at_load: Decimal | None  # the month's bill ÷ its tokens
    api_cost_per_million_output_tokens: Decimal | None  # prompt tokens included
    breakeven_output_tokens_per_day: Decimal | None  # None: the API is always cheaper
    api_cost_per_month: Decimal | None
    monthly_saving_vs_api: Decimal | None  # API minus self-hosting at the load


def at_load_floor(price_per_gpu_hour: Decimal, gpus: int,
                  load_output_tokens_per_s: float) -> Decimal:
    """The hour's bill of `gpus` GPUs per million of the load's output tokens in an hour:
    serving_cost's cost per million output tokens at the load is this or, where the GPUs
    cannot produce the load, more. Known before the deployment is sized, it bounds what any
    deployment of that many GPUs at that price can cost per token at the load."""
    load_per_hour = dec(load_output_tokens_per_s, "load") * SECONDS_PER_HOUR
    return price_per_gpu_hour * gpus / load_per_hour * MILLION


def serving_cost(
    *, price_per_gpu_hour: Decimal, gpus: int, output_tokens_per_s: float, prompt_tokens: int,
    output_tokens: int, hours_per_month: Decimal, load_output_tokens_per_s: float | None = None,
    replica_gpus: int | None = None, replica_output_tokens_per_s: float | None = None,
    api_price_per_million_input: Decimal | None = None,
    api_price_per_million_output: Decimal | None = None,
) -> ServingCost:
    """Price a deployment of `gpus` GPUs producing `output_tokens_per_s` output tokens/s.

    `replica_gpus` and `replica_output_tokens_per_s` describe the smallest unit that can be
    deployed (one replica), for the API breakeven; by default the whole deployment.
    """
    positive(price_per_gpu_hour, "the price per GPU-hour", allow_zero=True)
    if gpus < 1:
        raise ValueError("a deployment has at least one GPU")
    if output_tokens_per_s <= 0:
        raise ValueError("a deployment must produce tokens")
    per_hour = price_per_gpu_hour * gpus
    tokens_per_hour = dec(output_tokens_per_s, "throughput") * SECONDS_PER_HOUR
    per_m_out = per_hour / tokens_per_hour * MILLION
    all_tokens = Decimal(prompt_tokens + output_tokens) / Decimal(output_tokens)
    per_m_all = per_hour / (tokens_per_hour * all_tokens) * MILLION
    per_request = per_hour / (tokens_per_hour / Decimal(output_tokens))
    per_month = at_load = None
    if load_output_tokens_per_s is not None:
        per_month = per_hour * hours_per_month
        load_per_hour = dec(load_output_tokens_per_s, "load") * SECONDS_PER_HOUR
        # Paid every hour, used as much as the load: never below the full-load figure.
        at_load = max(per_m_out, at_load_floor(price_per_gpu_hour, gpus,
                                               load_output_tokens_per_s))

    api_per_m = breakeven = api_month = saving = None
    if api_price_per_million_input is not None or api_price_per_million_output is not None:
        p_in = api_price_per_million_input or Decimal(0)
        p_out = api_price_per_million_output or Decimal(0)
        positive(p_in, "--api-price-per-million-input", allow_zero=True)
        positive(p_out, "--api-price-per-million-output", allow_zero=True)
        # The API's bill per million output tokens, the prompts that come with them included.
        api_per_m = p_out + p_in * Decimal(prompt_tokens) / Decimal(output_tokens)
        unit_gpus = replica_gpus or gpus
        unit_tokens = replica_output_tokens_per_s or output_tokens_per_s
        unit_per_hour = price_per_gpu_hour * unit_gpus
        unit_per_m = unit_per_hour / (dec(unit_tokens, "throughput") * SECONDS_PER_HOUR) * MILLION
        if api_per_m > 0 and unit_per_m < api_per_m:
            breakeven = unit_per_hour * HOURS_PER_DAY / api_per_m * MILLION
        if per_month is not None:  # set with load_per_hour when the load is given
            api_month = load_per_hour * hours_per_month * api_per_m / MILLION
            saving = api_month - per_month
    return ServingCost(price_per_gpu_hour, gpus, tokens_per_hour, per_hour, per_m_out,
                       per_m_all, per_request, per_month, at_load, api_per_m, breakeven,
                       api_month, saving)


__all__ = ["ServingCost", "at_load_floor", "serving_cost"]
