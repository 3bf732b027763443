"""What a serving question asks: the request shape, the operating point (a concurrency or a
service level) and the load (`ServingSpec`), checked, with the prompt and output tokens it
implies. `serving` answers it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracker.core.errors import InvalidInput, usage_error
from tracker.sizing.replica import DEFAULT_OUTPUT_TOKENS, split_context

DEFAULT_PROMPT_TOKENS = 1000
# --attention-parallel: auto (the faster layout; ServingSpec None), tensor or data.
ATTENTION_PARALLEL = ("auto", "tensor", "data")
SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingSpec:
    """The request shape, the operating point and the load of a serving question."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    concurrency: int | None = None
    max_tpot_ms: float | None = None
    min_tokens_per_s_per_user: float | None = None
    max_ttft_ms: float | None = None
    requests_per_day: float | None = None
    output_tokens_per_day: float | None = None
    # How a MoE replica splits its attention (--attention-parallel): "tensor" (TP), "data"
    # (attention data parallel with the experts spread over the group), or None (auto): both
    # are tried (dense models: TP only).
    attention_parallel: str | None = None

    @property
    def has_slo(self) -> bool:
        return any(v is not None for v in (self.max_tpot_ms, self.min_tokens_per_s_per_user,
                                           self.max_ttft_ms))

    @property
    def tpot_limit_s(self) -> float | None:
        """The tighter of --max-tpot-ms and 1/--min-tokens-per-s-per-user, in seconds."""
        limits = []
        if self.max_tpot_ms is not None:
            limits.append(self.max_tpot_ms / 1000.0)
        if self.min_tokens_per_s_per_user is not None:
            limits.append(1.0 / self.min_tokens_per_s_per_user)
        return min(limits) if limits else None

    @property
    def ttft_limit_s(self) -> float | None:
        return None if self.max_ttft_ms is None else self.max_ttft_ms / 1000.0

    def slo_json(self) -> dict[str, float | None]:
        return {"max_tpot_ms": self.max_tpot_ms,
                "min_tokens_per_s_per_user": self.min_tokens_per_s_per_user,
                "max_ttft_ms": self.max_ttft_ms}


def request_shape(spec: ServingSpec, context: int | None) -> tuple[int, int]:
    """(prompt, output) tokens: given ones, the rest of --context, or 1,000 / 1,000.

    With only --context, the output is min(1,000, context/2) and the prompt the rest, so
    --context stays the sum of the two.
    """
    prompt, output = spec.prompt_tokens, spec.output_tokens
    for label, value in (("--prompt-tokens", prompt), ("--output-tokens", output)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise InvalidInput(f"{label} must be a positive integer, got {value!r}")
    if context is not None:
        if prompt is not None and output is not None:
            if prompt + output != context:
                raise InvalidInput(f"--context {context} is not --prompt-tokens {prompt} + "
                                   f"--output-tokens {output}; give two of the three")
        elif prompt is not None:
            output = context - prompt
        elif output is not None:
            prompt = context - output
        else:
            prompt, output = split_context(context)
        if prompt < 1 or output < 1:
            raise InvalidInput(f"--context {context} leaves no room for both a prompt and an "
                               "output token")
    return (prompt or DEFAULT_PROMPT_TOKENS, output or DEFAULT_OUTPUT_TOKENS)


def attention_layout(value: object) -> object:
    """The ServingSpec value of an --attention-parallel choice or an `attention_parallel`
    workload key: lower case, auto as None; anything else is left for check_spec."""
    if isinstance(value, str):
        value = value.strip().lower()
        return None if value == "auto" else value
    return value


def check_spec(spec: ServingSpec) -> None:
    """One line for each impossible operating point or load."""
    if spec.concurrency is not None and (not isinstance(spec.concurrency, int)
                                         or spec.concurrency < 1):
        raise InvalidInput(f"--concurrency must be a positive integer, got {spec.concurrency!r}")
    for label, value in (("--max-tpot-ms", spec.max_tpot_ms),
                         ("--min-tokens-per-s-per-user", spec.min_tokens_per_s_per_user),
                         ("--max-ttft-ms", spec.max_ttft_ms),
                         ("--requests-per-day", spec.requests_per_day),
                         ("--output-tokens-per-day", spec.output_tokens_per_day)):
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise InvalidInput(f"{label} must be more than 0, got {value:g}")
    if spec.attention_parallel not in (None, "tensor", "data"):
        raise InvalidInput("--attention-parallel must be one of "
                           f"{', '.join(ATTENTION_PARALLEL)}, got {spec.attention_parallel!r}")
    if spec.requests_per_day is not None and spec.output_tokens_per_day is not None:
        raise InvalidInput("give --requests-per-day or --output-tokens-per-day, not both")
    if spec.concurrency is not None and spec.has_slo:
        raise InvalidInput("give --concurrency or a service level (--max-tpot-ms, "
                           "--min-tokens-per-s-per-user, --max-ttft-ms), not both")


def check_layout(spec: ServingSpec, model: Any) -> None:
    """Attention data parallel spreads a mixture of experts' routed experts over the group: a
    dense model's replica is tensor parallel (a usage error, exit 2)."""
    if spec.attention_parallel == "data" and not model.is_moe:
        raise usage_error(f"--attention-parallel data is for a mixture of experts (its routed "
                          f"experts spread over the group); {model.id} is dense: use tensor "
                          "or auto")


def load_output_tokens_per_s(spec: ServingSpec, output_tokens: int) -> float | None:
    if spec.output_tokens_per_day is not None:
        return spec.output_tokens_per_day / SECONDS_PER_DAY
    if spec.requests_per_day is not None:
        return spec.requests_per_day * output_tokens / SECONDS_PER_DAY
    return None
