"""The serving answers (`cost -w inference`, `compare -w inference`) as their JSON documents:
the cost keys of a run, the per-token money of a deployment (SERVING_COST_KEYS, and
SERVING_API_KEYS against an API price) and the ranked deployments.

Pure, like tracker/answers/documents.py (the training answers) whose helpers it shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.documents import ranked_rows
from tracker.answers.offers import offer_json
from tracker.core.errors import InvalidInput
from tracker.economics.cost import run_cost
from tracker.economics.units import money_out, sig

if TYPE_CHECKING:
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow


SERVING_COST_KEYS = ("cost_per_million_output_tokens", "cost_per_million_tokens",
                     "cost_per_request", "cost_per_month")
SERVING_API_KEYS = ("api_cost_per_million_output_tokens", "breakeven_output_tokens_per_day",
                    "api_cost_per_month", "monthly_saving_vs_api")
SERVING_COMPARE_COLUMNS = ["gpu", "count", "provider", "category",
                           "cost_per_million_output_tokens",
                           "cost_per_million_output_tokens_at_load", "cost_per_month",
                           "tensor_parallel", "pipeline_parallel", "replicas", "concurrency",
                           "tokens_per_s_per_user", "ttft_s", "output_tokens_per_s",
                           "price_per_gpu_hour", "instance_type", "instances", "region"]


def serving_money(cost: Any) -> dict[str, Any]:
    """The money keys of a priced deployment (exact decimals, rounded at the edge)."""
    from tracker.economics.serving import PER_TOKEN_PLACES

    out: dict[str, Any] = {
        "cost_per_million_output_tokens": money_out(cost.cost_per_million_output_tokens,
                                                    PER_TOKEN_PLACES),
        "cost_per_million_tokens": money_out(cost.cost_per_million_tokens, PER_TOKEN_PLACES),
        "cost_per_request": money_out(cost.cost_per_request, PER_TOKEN_PLACES),
        "cost_per_month": money_out(cost.cost_per_month),
        "cost_per_million_output_tokens_at_load": money_out(
            cost.cost_per_million_output_tokens_at_load, PER_TOKEN_PLACES),
    }
    if cost.api_cost_per_million_output_tokens is not None:
        out.update({
            "api_cost_per_million_output_tokens": money_out(
                cost.api_cost_per_million_output_tokens, PER_TOKEN_PLACES),
            "breakeven_output_tokens_per_day": None
            if cost.breakeven_output_tokens_per_day is None
            else int(cost.breakeven_output_tokens_per_day.to_integral_value()),
            "api_cost_per_month": money_out(cost.api_cost_per_month),
            "monthly_saving_vs_api": money_out(cost.monthly_saving_vs_api),
        })
    return out


def serving_cost_document(
    settings: EconomicsSettings, *, served: Any, price: Decimal | None, count: int,
    currency: str, offer: PriceRow | None = None, instances: int | None = None,
    provider: str | None = None, share: Any = None,
    tokens: float | None = None, sizing_warnings: Sequence[str] = (),
    api_price_per_million_input: Decimal | None = None,
    api_price_per_million_output: Decimal | None = None,
) -> dict[str, Any]:
    """`cost -w inference`: the COST_KEYS (a run of --tokens output tokens when given), the
    serving object and the per-token money (SERVING_COST_KEYS, SERVING_API_KEYS). The price
    per GPU-hour is the offer's when an offer is given, else `price`. `share` (a
    `candidates.ServingOption`) says when the deployment is part of one larger instance:
    `billed_gpus` is what the instance bills, `instance_share` says it in words."""
    from tracker.economics.serving import serving_cost

    if offer is not None:
        price = offer.price_per_gpu_hour
        rule, billing_source = settings.billing(offer.provider)
    else:
        rule, billing_source = settings.billing(provider)
    if price is None:
        raise InvalidInput("serving cost: give a price per GPU-hour or an offer")
    chosen = served.chosen
    cost = serving_cost(
        price_per_gpu_hour=price, gpus=count, output_tokens_per_s=served.output_tokens_per_s,
        prompt_tokens=served.prompt_tokens, output_tokens=served.output_tokens,
        hours_per_month=settings.value("hours_per_month"),
        load_output_tokens_per_s=served.load_output_tokens_per_s,
        replica_gpus=chosen.replica_gpus,
        replica_output_tokens_per_s=served.point.output_tokens_per_s,
        api_price_per_million_input=api_price_per_million_input,
        api_price_per_million_output=api_price_per_million_output)
    wall = run = None
    if tokens is not None:
        wall = float(tokens) / served.output_tokens_per_s / 3600.0
        run = run_cost(price, float(count), wall, rule)
    data: dict[str, Any] = {
        "flops": None, "wall_hours": sig(wall) if wall is not None else None,
        "gpu_hours": sig(run.gpu_hours) if run else None, "price_per_gpu_hour": price,
        "currency": currency, "cost": money_out(run.cost) if run else None,
        "offer": offer_json(offer), "gpu": served.gpu, "count": count,
        "instances": instances, "billing_source": billing_source,
        "billed_gpus": share.billed_gpus if share is not None else None,
        "instance_share": share.share_note if share is not None else None,
        **serving_money(cost), "serving": served.to_json(),
    }
    data["warnings"] = [*sizing_warnings, *served.warnings]
    return data


def serving_compare_rows(options: Sequence[Any], *, skipped: Sequence[str],
                         priced_gpus: Sequence[str], max_gpus: int, as_of: datetime | None,
                         limit: int | None = None) -> list[dict[str, Any]]:
    """The ranked deployments of `compare -w inference`, cheapest per M output tokens first."""
    rows = []
    for o in options:
        s, p = o.served, o.served.point
        rows.append({
            "gpu": o.gpu, "count": o.count, "provider": o.offer.provider,
            "category": o.offer.category, **serving_money(o.cost),
            "tensor_parallel": s.chosen.tensor_parallel,
            "pipeline_parallel": s.chosen.pipeline_parallel,
            "attention_data_parallel": s.chosen.attention_data_parallel,
            "expert_parallel": s.chosen.expert_parallel, "replicas": s.chosen.replicas,
            "concurrency": p.concurrency, "tokens_per_s_per_user": sig(1.0 / p.tpot_s),
            "tpot_s": sig(p.tpot_s), "ttft_s": sig(p.ttft_s),
            "output_tokens_per_s": sig(s.output_tokens_per_s),
            "price_per_gpu_hour": o.offer.price_per_gpu_hour, "currency": o.offer.currency,
            "instance_type": o.offer.instance_type, "instances": o.instances,
            "region": o.offer.region, "offer_id": o.offer.offer_id,
            "calibrated": s.calibration.calibrated,
        })
    return ranked_rows(rows, limit, fits="serves this workload at the service level",
                       skipped=skipped, priced_gpus=priced_gpus, max_gpus=max_gpus, as_of=as_of)
