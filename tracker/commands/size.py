"""`gpu-tracker size` and `gpu-tracker models`: the sizing engine on the command line.

Neither command touches the database; both import only the sizing package (no pandas,
SQLAlchemy or scrapers), so they start fast.
"""

from __future__ import annotations

import re
from typing import Any

import click

from tracker.commands.params import WHOLE_GPUS
from tracker.output import emit, format_option, render_table

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


class Quantity(click.ParamType):
    """A count like `2e9`, `7B`, `15T` or `500M` (decimal suffixes)."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, (int, float)):
            return float(value)
        match = _NUMBER.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a number (examples: 2e9, 7B, 15T, 500M)", param, ctx)
        return float(match.group(1)) * _SUFFIX[match.group(2).lower()]


QUANTITY = Quantity()


def _choices(values: tuple[str, ...]) -> click.Choice:
    return click.Choice(values, case_sensitive=False)


def _size_options(func):
    from tracker.sizing import memory as m

    options = [
        click.option("--model", "-m", help="Model preset or Hugging Face id (see `models`)."),
        click.option("--params", type=QUANTITY,
                     help="Rough path: parameter count only (e.g. 7B); shape is assumed."),
        click.option("--layers", type=click.IntRange(min=1), help="Architecture: layers."),
        click.option("--hidden", type=click.IntRange(min=1), help="Architecture: hidden size."),
        click.option("--heads", type=click.IntRange(min=1), help="Architecture: attention heads."),
        click.option("--kv-heads", type=click.IntRange(min=1),
                     help="Architecture: KV heads (default: heads)."),
        click.option("--head-dim", type=click.IntRange(min=1),
                     help="Architecture: head dim (default: hidden/heads)."),
        click.option("--intermediate", type=click.IntRange(min=1),
                     help="Architecture: MLP size (default: Llama's 8h/3 rounded to 256)."),
        click.option("--vocab", type=click.IntRange(min=1), help="Architecture: vocabulary."),
        click.option("--tied-embeddings", is_flag=True, help="Architecture: lm_head tied."),
        click.option("--max-context", type=click.IntRange(min=1),
                     help="Architecture: maximum context."),
        click.option("--workload", "-w", type=_choices(m.WORKLOADS), default="inference",
                     show_default=True),
        click.option("--precision", type=_choices(m.PRECISIONS), default="bf16",
                     show_default=True, help="Weight precision."),
        click.option("--kv-precision", type=_choices(m.KV_PRECISIONS), default="auto",
                     show_default=True,
                     help="KV cache precision (auto: the weights' 16-bit type)."),
        click.option("--optimizer", type=_choices(m.OPTIMIZERS), default="adamw",
                     show_default=True,
                     help="adamw = mixed precision, 16 B/param; adamw-fp32grad 18 (Megatron)."),
        click.option("--sharding", type=_choices(m.SHARDINGS), default="none", show_default=True),
        click.option("--offload", type=_choices(m.OFFLOADS), default="none", show_default=True),
        click.option("--attention", type=_choices(m.ATTENTIONS), default="flash",
                     show_default=True),
        click.option("--recompute", type=_choices(m.RECOMPUTES), default="none",
                     show_default=True, help="Activation recomputation (checkpointing)."),
        click.option("--micro-batch", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--seq-len", type=click.IntRange(min=1),
                     help="Training sequence length (default 4096 or the model maximum)."),
        click.option("--context", type=click.IntRange(min=1),
                     help="Serving: tokens per request, prompt + output (default: model max)."),
        click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Serving: requests in flight."),
        click.option("--lora-rank", type=click.IntRange(min=1), default=16, show_default=True),
        click.option("--lora-targets", default="all-linear", show_default=True,
                     help="all-linear, attention, mlp, or a list like q,v."),
        click.option("--quant-group-size", type=click.IntRange(min=1), default=128,
                     show_default=True, help="int4 group size (one fp16 scale per group)."),
        click.option("--gpu", "-g", help="GPU model (h100, a100-80gb, rtx4090, ...)."),
        click.option("--count", "-n", type=WHOLE_GPUS,
                     help="GPUs to plan and time for (default: the smallest plan that fits)."),
        click.option("--gpus-per-node", type=click.IntRange(min=1), default=8,
                     show_default=True),
        click.option("--internode-bw", "internode_gbps",
                     type=click.FloatRange(min=0, min_open=True),
                     help="Inter-node bandwidth per GPU in GB/s (bytes), unidirectional; "
                          "400 Gb/s NDR = 50. Default: the GPU's typical fabric."),
        click.option("--usable-fraction", type=click.FloatRange(0, 1, min_open=True),
                     default=0.9, show_default=True, help="Share of GPU memory a job may use."),
        click.option("--tp", "tensor_parallel", type=click.IntRange(min=1),
                     help="Fix tensor parallelism (must divide the heads)."),
        click.option("--pp", "pipeline_parallel", type=click.IntRange(min=1),
                     help="Fix pipeline parallelism."),
        click.option("--virtual-stages", type=click.IntRange(min=1), default=1,
                     show_default=True, help="Interleaved pipeline chunks per GPU."),
        click.option("--global-batch-tokens", type=QUANTITY,
                     help="Tokens per optimizer step (default 4Mi pretrain, 1Mi fine-tune)."),
        click.option("--tokens", "-t", type=QUANTITY,
                     help="Training tokens (or tokens to generate when serving) for time."),
        click.option("--mfu", type=click.FloatRange(0, 1, min_open=True),
                     help="Measured end-to-end MFU; time = FLOPs/(GPUs × peak × MFU)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _gb(value: float | None) -> str:
    return "" if value is None else f"{value / 1e9:,.2f}"


def _gib(value: float | None) -> str:
    return "" if value is None else f"{value / 2**30:,.2f}"


def render_size_table(data: dict[str, Any]) -> str:
    """The human view: the memory breakdown in GB (10^9 B) and GiB (2^30 B), labelled."""
    per_gpu = data.get("per_gpu") or {}
    lines = [
        f"{data['model']} · {data['workload']} · {data['precision']}"
        + (f" on {data['gpu']}" if data.get("gpu") else ""),
        f"parameters: {data['params']:,} ({data['params'] / 1e9:.2f} B)"
        + (f", active {data['active_params']:,}" if data["active_params"] != data["params"]
           else "")
        + (f", trainable {data['trainable_params']:,}" if data["trainable_params"]
           and data["trainable_params"] != data["params"] else ""),
        "",
    ]
    parts = [
        ("weights", "weights_bytes", "weights"),
        ("gradients", "gradients_bytes", "gradients"),
        ("optimizer states", "optimizer_bytes", "optimizer"),
        ("activations", "activations_bytes", "activations"),
        ("KV cache", "kv_cache_bytes", "kv_cache"),
        ("overhead", "overhead_bytes", "overhead"),
    ]
    rows = []
    for label, total_key, gpu_key in parts:
        total = data[total_key]
        mine = per_gpu.get(gpu_key) if per_gpu else None
        rows.append({"memory": label, "total GB": _gb(total), "total GiB": _gib(total),
                     "per GPU GB": _gb(mine), "per GPU GiB": _gib(mine)})
    rows.append({"memory": "total", "total GB": _gb(data["total_bytes"]),
                 "total GiB": _gib(data["total_bytes"]),
                 "per GPU GB": _gb(data.get("per_gpu_bytes")),
                 "per GPU GiB": _gib(data.get("per_gpu_bytes"))})
    if data.get("usable_gpu_bytes") is not None:
        rows.append({"memory": "usable per GPU", "total GB": "", "total GiB": "",
                     "per GPU GB": _gb(data["usable_gpu_bytes"]),
                     "per GPU GiB": _gib(data["usable_gpu_bytes"])})
    lines.append(render_table(rows, ["memory", "total GB", "total GiB", "per GPU GB",
                                     "per GPU GiB"]))
    lines.append("GB = 10^9 bytes, GiB = 2^30 bytes; totals are for one model replica before "
                 "sharding (offloaded parts included).")
    kvt = data["kv_cache_bytes_per_token"]
    lines.append(f"KV cache per token: {kvt:,} bytes ({kvt / 1024:,.1f} KiB)")
    if data.get("offloaded_bytes"):
        lines.append(f"offloaded to CPU: {_gb(data['offloaded_bytes'])} GB "
                     f"({_gib(data['offloaded_bytes'])} GiB)")
    if data.get("gpu"):
        lines.append("")
        lines.append(f"fits on one GPU: {'yes' if data['fits_single_gpu'] else 'no'}")
        needed = data.get("gpus_needed")
        lines.append("smallest plan: " + (f"{needed} GPU{'s' if needed != 1 else ''}"
                                          if needed else "none fits"))
        if data.get("tensor_parallel") is not None:
            what = f"on {data['count']} GPUs" if data.get("count") else "plan"
            lines.append(f"{what}: TP {data['tensor_parallel']} × PP {data['pipeline_parallel']}"
                         f" × DP {data['data_parallel']} = {data['gpus_used']} GPUs, "
                         f"{'fits' if data.get('fits') else 'does NOT fit'}")
        if data.get("kv_capacity_tokens") is not None:
            lines.append(f"KV capacity per replica: {data['kv_capacity_tokens']:,} tokens")
    if "flops" in data:
        lines.append("")
        lines.append(f"compute: {data['flops']:.3e} FLOPs for {data['tokens']:.4g} tokens")
        if data.get("wall_hours") is not None:
            eff = data.get("scaling_efficiency")
            lines.append(
                f"MFU {data['mfu']:.3f} ({data['mfu_source']}"
                + (f", default range {data['mfu_range'][0]:.2f}-{data['mfu_range'][1]:.2f}"
                   if data.get("mfu_range") else "") + ")"
                + (f", scaling efficiency {eff:.3f}" if eff is not None else "")
                + f", peak {data['peak_tflops']:g} TFLOPS dense")
            lines.append(f"wall time {data['wall_hours']:,.2f} h, {data['gpu_hours']:,.1f} "
                         "GPU-hours")
    if data.get("warnings"):
        lines.append("")
        lines.extend(f"warning: {w}" for w in data["warnings"])
    return "\n".join(lines)


@click.command("size")
@_size_options
@format_option
def size(fmt: str, **options: Any) -> None:
    """Memory by part, the GPUs and parallelism that fit, and run time for a job.

    \b
    Examples:
      gpu-tracker size --model llama-3.1-70b --workload inference --context 131072 --gpu h100
      gpu-tracker size -m llama-3.1-8b -w full-finetune --sharding zero3 -g h100 -n 8 -t 2e9
      gpu-tracker size --params 7B -w qlora -g rtx4090 --recompute full
    """
    from tracker.sizing import SizingRequest, size_workload

    for key in ("workload", "precision", "kv_precision", "optimizer", "sharding", "offload",
                "attention", "recompute"):
        options[key] = options[key].lower()
    result = size_workload(SizingRequest(**options))
    data = result.to_json()
    emit(data, fmt, table_text=render_size_table(data) if fmt == "table" else None)


@click.command("models")
@format_option
def models(fmt: str) -> None:
    """List the model presets with parameter counts computed from their architecture."""
    from tracker.sizing import model_presets

    rows = [spec.summary() for spec in model_presets()]
    if fmt == "json":
        emit(rows, fmt)
        return
    columns = ["id", "params", "active_params", "layers", "hidden", "heads", "kv_heads",
               "head_dim", "intermediate", "vocab", "max_context",
               "kv_cache_bytes_per_token_bf16"]
    if fmt == "csv":
        emit(rows, fmt, columns=[*columns, "hf_id", "published_params"])
        return
    table = [{**r, "params": f"{r['params'] / 1e9:.3f} B",
              "active_params": f"{r['active_params'] / 1e9:.3f} B"} for r in rows]
    emit(table, fmt, columns=columns)
