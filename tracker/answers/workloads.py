"""The workload a question describes, from the CLI's workload flags or a `[report] workloads`
entry: the sizing engine's fields and the serving spec (shape, service level, load).

`workload_request` is the one conversion both go through, so `size`, `cost`, `compare`, the
report and the price index check a workload the same way; `Workload.parse` reads a configured
entry (kind, deadline, runs or hours per month, utilization, checkpointing, GPU limit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tracker.core.errors import InvalidInput

# The one default workload of size, cost and compare (README "Workload options").
DEFAULT_WORKLOAD = "inference"
# Parameters that are choices (lower-cased before they reach the engine).
_CHOICE_FIELDS = ("workload", "precision", "kv_precision", "optimizer", "sharding", "offload",
                  "attention", "recompute", "plan", "adapter_precision", "cross_entropy")
# Parameters that make up the serving spec rather than the sizing request.
SERVING_FIELDS: tuple[str, ...] = ("prompt_tokens", "output_tokens", "concurrency", "max_tpot_ms",
                  "min_tokens_per_s_per_user", "max_ttft_ms", "requests_per_day",
                  "output_tokens_per_day", "attention_parallel")
# Serving flags that only mean something with --workload inference.
_SERVING_ONLY = tuple(f for f in SERVING_FIELDS if f != "concurrency")
KINDS = {  # config word -> sizing workload
    "finetune": "full-finetune", "full-finetune": "full-finetune", "lora": "lora",
    "qlora": "qlora", "pretrain": "pretrain", "serve": "inference", "inference": "inference",
}

DEFAULT_DEADLINE_HOURS = {"full-finetune": 24.0, "lora": 24.0, "qlora": 24.0,
                          "pretrain": 720.0}

DEFAULT_CHECKPOINT_MINUTES = 10.0

DEFAULT_RESTART_MINUTES = 15.0

_SIZING_FIELDS: frozenset[str] | None = None



def _sizing_fields() -> frozenset[str]:
    global _SIZING_FIELDS
    if _SIZING_FIELDS is None:
        from tracker.sizing import SizingRequest

        _SIZING_FIELDS = frozenset(f.name for f in fields(SizingRequest)) - {"gpu", "count"}
    return _SIZING_FIELDS



@dataclass(frozen=True)
class Workload:
    name: str
    workload: str  # the sizing engine's workload
    sizing: dict[str, Any]  # SizingRequest fields (model, tokens, context, ...)
    deadline_hours: float | None
    runs_per_month: float
    hours_per_month: float | None  # serving: hours online per month
    utilization: float | None  # rent vs buy; None = derived from runs or hours
    checkpoint_minutes: float
    restart_minutes: float
    max_gpus: int
    serve: dict[str, Any] = field(default_factory=dict)  # ServingSpec fields (shape, SLO, load)

    @property
    def serving(self) -> bool:
        return self.workload == "inference"

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Workload:
        raw = dict(raw)
        name = str(raw.pop("name", "") or "")
        kind = str(raw.pop("kind", raw.pop("workload", "")) or "")
        if kind not in KINDS:
            raise InvalidInput(f"workload {name or '?'}: kind must be one of "
                               f"{', '.join(sorted(KINDS))}, got {kind!r}")
        workload = KINDS[kind]
        deadline = raw.pop("deadline_hours", DEFAULT_DEADLINE_HOURS.get(workload))
        runs = float(raw.pop("runs_per_month", 0) or 0)
        hours = raw.pop("hours_per_month", None)
        utilization = raw.pop("utilization", None)
        checkpoint = float(raw.pop("checkpoint_minutes", DEFAULT_CHECKPOINT_MINUTES))
        restart = float(raw.pop("restart_minutes", DEFAULT_RESTART_MINUTES))
        max_gpus = int(raw.pop("max_gpus", 64))
        extra = raw.pop("sizing", {}) or {}
        sizing = {**raw, **dict(extra)}
        serve = _serving_values({k: sizing.pop(k) for k in SERVING_FIELDS if k in sizing})
        unknown = sorted(set(sizing) - _sizing_fields())
        if unknown:
            raise InvalidInput(f"workload {name or kind}: unknown setting(s) {', '.join(unknown)}")
        sizing = _workload_fields(sizing, serve, workload, name or kind)
        if workload != "inference" and not sizing.get("tokens"):
            raise InvalidInput(f"workload {name or kind}: training needs `tokens`")
        if workload == "inference":
            hours = float(hours) if hours is not None else 730.0
        sizing["workload"] = workload
        if not name:
            named = sizing.get("model") or sizing.get("model_config") or sizing.get("params")
            name = f"{kind} {named}"
        return cls(name=name, workload=workload, sizing=sizing,
                   deadline_hours=float(deadline) if deadline else None,
                   runs_per_month=runs, hours_per_month=hours,
                   utilization=float(utilization) if utilization is not None else None,
                   checkpoint_minutes=checkpoint, restart_minutes=restart, max_gpus=max_gpus,
                   serve=serve)

    def describe(self) -> dict[str, Any]:
        return {
            "serve": dict(sorted(self.serve.items())),
            "name": self.name, "workload": self.workload, "sizing": dict(sorted(
                self.sizing.items())), "deadline_hours": self.deadline_hours,
            "runs_per_month": self.runs_per_month, "hours_per_month": self.hours_per_month,
            "utilization": self.utilization, "checkpoint_minutes": self.checkpoint_minutes,
            "restart_minutes": self.restart_minutes, "max_gpus": self.max_gpus,
        }



def _workload_fields(sizing: dict[str, Any], serve: dict[str, Any], workload: str,
                     name: str) -> dict[str, Any]:
    """The sizing fields of a configured workload, through the same function the CLI's
    workload options go through (`workload_request`): the same
    serving-only checks, and a serve workload's memory held at its request shape."""
    from tracker.sizing.serving_spec import check_layout, check_spec, request_shape

    try:
        fields, spec = workload_request({**sizing, **serve, "workload": workload})
        if fields.get("model_config") is not None:  # read and checked once, here
            from tracker.sizing.hf_config import load_model_config

            load_model_config(str(fields["model_config"]))
        if workload == "inference":
            check_spec(spec)
            request_shape(spec, fields.get("context"))
            if spec.attention_parallel == "data":
                check_layout(spec, _workload_model(fields))
    except InvalidInput as exc:
        raise InvalidInput(f"workload {name}: {exc}") from None
    return fields



def _workload_model(fields: Mapping[str, Any]) -> Any:
    """The ModelSpec a workload names (a preset or a config.json), else the sizing engine's
    dense model of its parameter count or architecture."""
    from tracker.sizing import SizingRequest
    from tracker.sizing.prepare import preparation, prepare_key

    return preparation(prepare_key(SizingRequest(**fields))).model


def _serving_values(serve: dict[str, Any]) -> dict[str, Any]:
    """`serve` with attention_parallel as the ServingSpec takes it (auto: the key dropped)."""
    from tracker.sizing.serving_spec import attention_layout

    if "attention_parallel" in serve:
        layout = attention_layout(serve.pop("attention_parallel"))
        if layout is not None:
            serve["attention_parallel"] = layout
    return serve


def workload_request(values: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """(SizingRequest fields, ServingSpec) from the parsed workload flags.

    The sizing fields keep the engine's defaults for flags not given (None values dropped);
    the memory figures use --concurrency or 1.
    """
    from tracker.sizing.serving import ServingSpec

    fields = {k: v for k, v in values.items() if k not in SERVING_FIELDS}
    for key in _CHOICE_FIELDS:
        if isinstance(fields.get(key), str):
            fields[key] = fields[key].lower()
    from tracker.sizing.serving_spec import attention_layout

    serving = {k: values.get(k) for k in SERVING_FIELDS}
    serving["attention_parallel"] = attention_layout(serving["attention_parallel"])
    for key in ("requests_per_day", "output_tokens_per_day"):
        value = serving[key]
        if value is not None and value <= 0:
            flag = "--" + key.replace("_", "-")
            raise InvalidInput(f"{flag} must be more than 0, got {value:g}")
    if fields.get("workload") != "inference":
        given = [k for k in _SERVING_ONLY if serving[k] is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise InvalidInput(f"{flag} is a serving option; use --workload inference")
    if serving["concurrency"] is not None:
        fields["concurrency"] = serving["concurrency"]
    if fields.get("workload") == "inference" and fields.get("context") is None and (
            serving["prompt_tokens"] is not None or serving["output_tokens"] is not None):
        from tracker.sizing.serving_spec import request_shape

        # The memory figures hold one request of the serving shape, not the model maximum.
        fields["context"] = sum(request_shape(ServingSpec(**serving), None))
    return ({k: v for k, v in fields.items() if v is not None}, ServingSpec(**serving))


def has_model(fields: Mapping[str, Any]) -> bool:
    """True when the workload names a model: a preset, a config.json, a parameter count or
    the architecture flags."""
    return any(fields.get(k) is not None for k in ("model", "model_config", "params", "layers"))


def wants_serving(fields: Mapping[str, Any]) -> bool:
    """True when the workload is serving (cost and compare price it per token)."""
    return fields.get("workload", DEFAULT_WORKLOAD) == "inference"
