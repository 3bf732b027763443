"""The workload options, declared once: `size`, `cost` and `compare` take the same flags.

`workload_options` adds every flag of `WORKLOAD_OPTIONS` (model, workload, precision,
sharding, offload, optimizer, recompute, batch, sequence, serving shape and service level,
load, parallelism); `tracker.answers.workloads.workload_request` turns the parsed values into
the sizing engine's fields and the serving spec. Choices, defaults, validation and exit codes
are therefore the same on every command: a bad choice or number is a click usage error
(exit 2).

Adding an option to all three commands is one line in `WORKLOAD_OPTIONS` (plus the field it
fills in `SizingRequest`, or in `SERVING_FIELDS` of tracker/answers/workloads.py for the serving
spec). The GPU and count are
not here: `size` and `cost` take one GPU and a count, `compare` sweeps them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import click

from tracker.answers.workloads import DEFAULT_WORKLOAD
from tracker.cli.commands.params import MAX_TOKENS, BoundedInt
from tracker.core import bounds
from tracker.sizing import memory as _mem
from tracker.sizing.serving_spec import ATTENTION_PARALLEL

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


class Quantity(click.ParamType):
    """A count like `2e9`, `7B`, `7g`, `15T` or `500M` (decimal suffixes)."""

    name = "N"

    def __init__(self, maximum: float | None = None, *, positive: bool = True) -> None:
        self.maximum = maximum
        self.positive = positive  # a count of 0 (or 0 tokens a step) would be ignored

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, (int, float)):
            number = float(value)
        else:
            match = _NUMBER.match(str(value))
            if not match:
                self.fail(f"{value!r} is not a number (examples: 2e9, 7B, 15T, 500M)", param,
                          ctx)
            number = float(match.group(1)) * _SUFFIX[match.group(2).lower()]
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.positive and number <= 0:
            self.fail(f"{value!r} must be more than 0", param, ctx)
        if self.maximum is not None and number > self.maximum:
            self.fail(f"{value!r} is above {self.maximum:g} (a sanity bound)", param, ctx)
        return number


class ModelConfigPath(click.ParamType):
    """A local Hugging Face config.json (or its directory), read and checked while parsing:
    a file the reader cannot use is a usage error (exit 2), as a bad flag is."""

    name = "FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        from tracker.sizing.hf_config import load_model_config

        load_model_config(str(value))
        return str(value)


class ModelName(click.ParamType):
    """A model preset or Hugging Face id, resolved while parsing: an unknown name is a usage
    error (exit 2) with the closest presets, before any offer is priced."""

    name = "NAME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        from tracker.core.errors import NotFound
        from tracker.sizing.models import resolve_model

        try:
            resolve_model(str(value))
        except NotFound as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


QUANTITY = Quantity()
PARAMS = Quantity(bounds.MAX_PARAMS)
REQUESTS_PER_DAY = Quantity(bounds.MAX_REQUESTS_PER_DAY)
TOKENS_PER_DAY = Quantity(bounds.MAX_TOKENS_PER_DAY)
BATCH_TOKENS = Quantity(bounds.MAX_BATCH_TOKENS)
LAYERS = BoundedInt(1, bounds.MAX_LAYERS, why="a sanity bound")
WIDTH = BoundedInt(1, bounds.MAX_WIDTH, why="a sanity bound")
SEQUENCE = BoundedInt(1, bounds.MAX_SEQUENCE, why="a sanity bound")
CONCURRENCY = BoundedInt(1, bounds.MAX_CONCURRENCY, why="a sanity bound")
PER_NODE = BoundedInt(1, bounds.MAX_GPUS_PER_NODE, why="the largest NVLink domain is 576")
PARALLEL = BoundedInt(1, bounds.MAX_GPUS, why="a sanity bound")
POSITIVE = click.FloatRange(min=0, min_open=True)

def _choices(values: tuple[str, ...]) -> click.Choice:
    return click.Choice(values, case_sensitive=False)


WORKLOAD_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--model", "-m", type=ModelName(),
                 help="Model preset or Hugging Face id (see `models`)."),
    click.option("--model-config", type=ModelConfigPath(),
                 help="A Hugging Face config.json (or a directory holding one): the model's "
                      "architecture, MoE, attention and shipped quantisation."),
    click.option("--params", type=PARAMS,
                 help="Rough path: parameter count only (e.g. 7B); shape is assumed."),
    click.option("--layers", type=LAYERS, help="Architecture: layers."),
    click.option("--hidden", type=WIDTH, help="Architecture: hidden size."),
    click.option("--heads", type=WIDTH, help="Architecture: attention heads."),
    click.option("--kv-heads", type=WIDTH,
                 help="Architecture: KV heads (default: heads)."),
    click.option("--head-dim", type=WIDTH,
                 help="Architecture: head dim (default: hidden/heads)."),
    click.option("--intermediate", type=WIDTH,
                 help="Architecture: MLP size (default: Llama's 8h/3 rounded to 256)."),
    click.option("--vocab", type=WIDTH, help="Architecture: vocabulary."),
    click.option("--tied-embeddings", is_flag=True, help="Architecture: lm_head tied."),
    click.option("--max-context", type=SEQUENCE,
                 help="Architecture: maximum context."),
    click.option("--workload", "-w", type=_choices(_mem.WORKLOADS), default=DEFAULT_WORKLOAD,
                 show_default=True),
    click.option("--precision", type=_choices(_mem.PRECISIONS), default="bf16",
                 show_default=True,
                 help="Weight precision (native: as the config.json ships them, e.g. "
                      "DeepSeek-V3 fp8 blocks, gpt-oss MXFP4 experts)."),
    click.option("--kv-precision", type=_choices(_mem.KV_PRECISIONS), default="auto",
                 show_default=True, help="KV cache precision (auto: the weights' 16-bit type)."),
    click.option("--optimizer", type=_choices(_mem.OPTIMIZERS), default="adamw",
                 show_default=True,
                 help="adamw = mixed precision, 16 B/param; adamw-fp32grad 18 (Megatron)."),
    click.option("--sharding", type=_choices(_mem.SHARDINGS),
                 help="ZeRO stage / FSDP (training default: the planner's choice)."),
    click.option("--offload", type=_choices(_mem.OFFLOADS), default="none", show_default=True),
    click.option("--attention", type=_choices(_mem.ATTENTIONS), default="flash",
                 show_default=True),
    click.option("--recompute", type=_choices(_mem.RECOMPUTES),
                 help="Activation recomputation (training default: the planner's choice)."),
    click.option("--micro-batch", type=CONCURRENCY,
                 help="Sequences per micro-batch (training default: the planner's choice;"
                      " gradient accumulation fills the global batch)."),
    click.option("--plan", type=_choices(("fastest", "smallest")), default="fastest",
                 show_default=True,
                 help="Training: the fastest plan that fits, or the fewest GPUs "
                      "(memory-minimal)."),
    click.option("--adapter-precision", type=_choices(_mem.ADAPTER_PRECISIONS),
                 help="LoRA/QLoRA adapter precision (default bf16, as QLoRA trains)."),
    click.option("--cross-entropy", type=_choices(_mem.CROSS_ENTROPIES), default="full",
                 show_default=True,
                 help="Training loss: full fp32 logits (Megatron, HF Trainer) or chunked "
                      "(torchtune: one fp32 chunk of 8 at a time)."),
    click.option("--seq-len", type=SEQUENCE,
                 help="Training sequence length (default 4096 or the model maximum)."),
    click.option("--context", type=SEQUENCE,
                 help="Serving: tokens per request, prompt + output (default: model max for "
                      "memory; the serving figures use --prompt-tokens + --output-tokens)."),
    click.option("--prompt-tokens", type=SEQUENCE,
                 help="Serving: prompt (input) tokens per request (default 1000)."),
    click.option("--output-tokens", type=SEQUENCE,
                 help="Serving: output tokens per request (default 1000)."),
    click.option("--concurrency", type=CONCURRENCY,
                 help="Serving: requests in flight per replica (default: the service level's "
                      "largest, else the most the KV cache holds; 1 for memory)."),
    click.option("--max-tpot-ms", type=POSITIVE,
                 help="Service level: time per output token at most this (ms)."),
    click.option("--min-tokens-per-s-per-user", type=POSITIVE,
                 help="Service level: each user sees at least this many tokens/s."),
    click.option("--max-ttft-ms", type=POSITIVE,
                 help="Service level: time to first token at most this (ms)."),
    click.option("--requests-per-day", type=REQUESTS_PER_DAY,
                 help="Serving load: requests a day (sets the replicas)."),
    click.option("--output-tokens-per-day", type=TOKENS_PER_DAY,
                 help="Serving load: output tokens a day, e.g. 50M (sets the replicas)."),
    click.option("--attention-parallel", type=_choices(ATTENTION_PARALLEL), default="auto",
                 show_default=True,
                 help="Serving a mixture of experts: attention tensor parallel (tensor), or "
                      "attention data parallel with the experts spread over the group (data: "
                      "DP attention + expert parallel, as SGLang and vLLM serve DeepSeek); "
                      "auto plans both and keeps the faster. Dense models: tensor."),
    click.option("--lora-rank", type=WIDTH, default=16, show_default=True),
    click.option("--lora-targets", default="all-linear", show_default=True,
                 help="all-linear, attention, mlp, or a list like q,v."),
    click.option("--quant-group-size", type=WIDTH, default=128,
                 show_default=True, help="int4 group size (one fp16 scale per group)."),
    click.option("--gpus-per-node", type=PER_NODE,
                 help="GPUs in one node (default: the GPU's host, 8; 4 on a GB200/GB300 "
                      "NVL72 compute tray; compare: capped by each offer's instance)."),
    click.option("--cluster-bw", "cluster_gbps", type=POSITIVE,
                 help="Network between nodes in Gb/s per node, all NICs (8 x 400G = 3200)."
                      " Default: the GPU's typical fabric (compare and cost: each offer's)."),
    click.option("--internode-bw", "internode_gbps", type=POSITIVE,
                 help="Inter-node bandwidth per GPU in GB/s (bytes), unidirectional; "
                      "400 Gb/s NDR = 50. Default: the GPU's typical fabric."),
    click.option("--usable-fraction", type=click.FloatRange(0, 1, min_open=True),
                 default=0.9, show_default=True, help="Share of GPU memory a job may use."),
    click.option("--tp", "tensor_parallel", type=PARALLEL,
                 help="Fix tensor parallelism (must divide the heads)."),
    click.option("--pp", "pipeline_parallel", type=PARALLEL,
                 help="Fix pipeline parallelism."),
    click.option("--virtual-stages", type=LAYERS, default=1, show_default=True,
                 help="Interleaved pipeline chunks per GPU."),
    click.option("--global-batch-tokens", type=BATCH_TOKENS,
                 help="Tokens per optimizer step (default 4Mi pretrain, 1Mi fine-tune)."),
    click.option("--tokens", "-t", type=Quantity(MAX_TOKENS),
                 help="Training tokens (or tokens to generate when serving) for time."),
    click.option("--mfu", type=click.FloatRange(0, 1, min_open=True),
                 help="Measured end-to-end MFU; time = FLOPs/(GPUs × peak × MFU)."),
]

# The one GPU of `size` and `cost` (`compare` filters by any number of GPUs instead). The count
# differs on purpose: `size` plans whole GPUs (default: the smallest plan), `cost` also prices
# fractional GPUs for a given --hours (default 1).
GPU_OPTION = click.option("--gpu", "-g",
                          help="GPU model (h100, a100-80gb, rtx4090, ...): sizing and store "
                               "prices.")

def workload_options(func: Any) -> Any:
    """Add every workload flag to a click command (in `WORKLOAD_OPTIONS` order)."""
    for option in reversed(WORKLOAD_OPTIONS):
        func = option(func)
    return func


def workload_param_names() -> tuple[str, ...]:
    """The keyword names the workload flags fill (for parity checks and callers)."""
    @click.command()
    @workload_options
    def probe(**_: Any) -> None:  # pragma: no cover - never invoked
        pass

    return tuple(p.name for p in probe.params)
