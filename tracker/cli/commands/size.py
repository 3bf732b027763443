"""`gpu-tracker size` and `gpu-tracker models`: the sizing engine on the command line.

Neither command touches the database; both import only the sizing package (no pandas,
SQLAlchemy or scrapers), so they start fast.
"""

from __future__ import annotations

from typing import Any

import click

from tracker.answers.workloads import workload_request
from tracker.cli.commands.params import WHOLE_GPUS
from tracker.cli.commands.printing import emit, format_option, render_table
from tracker.cli.commands.workload import (
    GPU_OPTION,
    QUANTITY,
    Quantity,
    workload_options,
)

__all__ = ["QUANTITY", "Quantity", "models", "render_serving_lines", "render_size_table", "size"]


def _gb(value: float | None) -> str:
    return "" if value is None else f"{value / 1e9:,.2f}"


def _gib(value: float | None) -> str:
    return "" if value is None else f"{value / 2**30:,.2f}"


def render_size_table(data: dict[str, Any]) -> str:
    """The human view: the memory breakdown in GB (10^9 B) and GiB (2^30 B), labelled, then
    the plan on the GPU, the compute and the serving figures where the document has them."""
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
    lines.extend(_memory_lines(data))
    if data.get("gpu"):
        lines.append("")
        lines.extend(_plan_lines(data))
    if "flops" in data:
        lines.append("")
        lines.extend(_compute_lines(data))
    if data.get("serving"):
        lines.append("")
        lines.extend(render_serving_lines(data["serving"]))
    if data.get("warnings"):
        lines.append("")
        lines.extend(f"warning: {w}" for w in data["warnings"])
    return "\n".join(lines)


def _memory_lines(data: dict[str, Any]) -> list[str]:
    """The memory table (per part, for the replica and per GPU) and the KV bytes per token."""
    per_gpu = data.get("per_gpu") or {}
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
    lines = [render_table(rows, ["memory", "total GB", "total GiB", "per GPU GB",
                                 "per GPU GiB"]),
             "GB = 10^9 bytes, GiB = 2^30 bytes; totals are for one model replica before "
             "sharding (offloaded parts included)."]
    kvt = data["kv_cache_bytes_per_token"]
    lines.append(f"KV cache per token: {kvt:,} bytes ({kvt / 1024:,.1f} KiB)")
    if data.get("offloaded_bytes"):
        lines.append(f"offloaded to CPU: {_gb(data['offloaded_bytes'])} GB "
                     f"({_gib(data['offloaded_bytes'])} GiB)")
    return lines


def _plan_lines(data: dict[str, Any]) -> list[str]:
    """Whether it fits, the smallest plan, the chosen plan, its links and its runners-up."""
    lines = [f"fits on one GPU: {'yes' if data['fits_single_gpu'] else 'no'}"]
    needed = data.get("gpus_needed")
    lines.append("smallest plan: " + (f"{needed} GPU{'s' if needed != 1 else ''}"
                                      if needed else "none fits"))
    if data.get("tensor_parallel") is not None:
        what = f"on {data['count']} GPUs" if data.get("count") else "plan"
        virtual = data.get("virtual_stages") or 1
        lines.append(f"{what}: TP {data['tensor_parallel']} × PP {data['pipeline_parallel']}"
                     + (f" (v {virtual})" if virtual > 1 else "")
                     + f" × DP {data['data_parallel']} = {data['gpus_used']} GPUs, "
                     f"{'fits' if data.get('fits') else 'does NOT fit'}"
                     + (f" ({data['plan']} plan)" if data.get("plan") else ""))
        if data.get("micro_batch") is not None:
            lines.append(f"micro-batch {data['micro_batch']} × gradient accumulation "
                         f"{data.get('gradient_accumulation')}, recompute "
                         f"{data['recompute']}, sharding {data['sharding']}")
    links = data.get("links")
    if links:
        host, domain = links["gpus_per_node"], links.get("scale_up_domain") or 0
        # A rack-scale domain (72 on NVL72) spans hosts: name both, as the plan uses both.
        inside = (f"a domain of {domain} GPUs (hosts of {host})" if domain > host
                  else f"a node of {host}")
        lines.append(f"links: {links['node_link']} {links['node_link_gbps']:g} GB/s per GPU"
                     f" inside {inside}, "
                     f"{links['cluster_gbps']:g} Gb/s per node between nodes "
                     f"({links['source']})")
    if data.get("runners_up") and data.get("mfu_source") == "given":
        # their hours are the model's, not --mfu's: not comparable with the chosen plan's
        lines.append(f"  runners-up timed by the model; --mfu {data['mfu']:g} times only the "
                     "chosen plan")
    for alt in data.get("runners_up") or []:
        took = (f"{alt['wall_hours']:,.2f} h" if "wall_hours" in alt else
                f"{alt['seconds_per_million_tokens']:,.3g} s per M tokens")
        lines.append(f"  runner-up: TP {alt['tensor_parallel']} × PP "
                     f"{alt['pipeline_parallel']} (v {alt['virtual_stages']}) × DP "
                     f"{alt['data_parallel']}, micro-batch {alt['micro_batch']}, recompute "
                     f"{alt['recompute']}, {alt['sharding']}: {took}")
    if data.get("kv_capacity_tokens") is not None:
        lines.append(f"KV capacity per replica: {data['kv_capacity_tokens']:,} tokens")
    return lines


def _compute_lines(data: dict[str, Any]) -> list[str]:
    """The FLOPs, and with a time the MFU and its source, the scaling and the GPU-hours."""
    lines = [f"compute: {data['flops']:.3e} FLOPs for {data['tokens']:.4g} tokens"]
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
    return lines


def _layout(plan: dict[str, Any]) -> str:
    """`TP 8`, or `attention DP 8 x EP 8` for a replica without tensor parallelism."""
    dp = plan.get("attention_data_parallel", 1)
    if dp > 1:
        return f"attention DP {dp} x EP {plan['expert_parallel']}"
    pp = plan.get("pipeline_parallel", 1)
    return f"TP {plan['tensor_parallel']}" + (f" x PP {pp}" if pp > 1 else "")


def render_serving_lines(serving: dict[str, Any]) -> list[str]:
    """The serving figures as the table views print them (size and cost)."""
    s = serving
    lines = [
        f"serving {s['prompt_tokens']:,} in / {s['output_tokens']:,} out: {_layout(s)}"
        + (" (nodes)" if s.get("pipeline_parallel", 1) > 1 else "")
        + f" x {s['replicas']} replica(s) = {s['gpus']} GPUs, {s['concurrency']} requests in "
        f"flight per replica (KV holds {s['max_concurrency_by_kv']:,}, "
        f"{s['kv_capacity_tokens']:,} tokens)",
        f"TTFT {s['ttft_s'] * 1000:,.0f} ms, TPOT {s['tpot_s'] * 1000:,.1f} ms "
        f"({s['tokens_per_s_per_user']:,.1f} tokens/s per user), {s['bound']}-bound",
        f"throughput {s['output_tokens_per_s']:,.0f} output tokens/s "
        f"({s['output_tokens_per_s_per_gpu']:,.0f} per GPU), {s['total_tokens_per_s']:,.0f} "
        f"tokens/s in+out, {s['requests_per_s']:,.2f} requests/s",
    ]
    if s.get("load_output_tokens_per_s") is not None:
        lines.append(f"load {s['load_output_tokens_per_s']:,.0f} output tokens/s: "
                     + ("met" if s["meets_load"] else "NOT met"))
    others = [p for p in s.get("plans", ()) if _layout(p) != _layout(s)]
    for plan in others:
        lines.append(f"  other plan {_layout(plan)} x {plan['replicas']}: "
                     + (f"{plan['output_tokens_per_s']:,.0f} output tokens/s at concurrency "
                        f"{plan['concurrency']}, TPOT {plan['tpot_s'] * 1000:,.1f} ms"
                        if plan["concurrency"] else "does not meet the service level"))
    cal = s["calibration"]
    lines.append(f"calibration: {cal['gpu_class']} class, "
                 + ("calibrated" if cal["calibrated"] else "extrapolated"))
    lines.extend(f"warning: {w}" for w in s.get("warnings", ()))
    return lines


@click.command("size")
@GPU_OPTION
@click.option("--count", "-n", type=WHOLE_GPUS,
              help="GPUs to plan and time for (default: the smallest plan that fits).")
@workload_options
@format_option
def size(fmt: str, **options: Any) -> None:
    """Memory by part, the GPUs and parallelism that fit, and run time for a job.

    \b
    Examples:
      gpu-tracker size --model llama-3.1-70b --workload inference --context 131072 --gpu h100
      gpu-tracker size -m llama-3.1-8b -w full-finetune --sharding zero3 -g h100 -n 8 -t 2e9
      gpu-tracker size --params 7B -w qlora -g rtx4090 --recompute full
      gpu-tracker size -m llama-3.1-70b -g h200 -n 2 --prompt-tokens 1000 --output-tokens 1000 \
          --max-tpot-ms 50
    """
    from tracker.sizing import SizingRequest, size_workload

    fields, spec = workload_request(options)
    request = SizingRequest(**fields)
    result = size_workload(request)
    data = result.to_json()
    if request.workload == "inference" and request.gpu is not None:
        data["serving"] = None
        if result.fits:
            from tracker.sizing.serving import serve

            data["serving"] = serve(request, spec).to_json()
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
    columns = ["id", "params", "active_params", "experts", "experts_per_token", "attention",
               "layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab",
               "max_context", "kv_cache_bytes_per_token_bf16"]
    if fmt == "csv":
        emit(rows, fmt, columns=[*columns, "quantization", "hf_id", "published_params",
                                 "source"])
        return
    table = [{**r, "params": f"{r['params'] / 1e9:.3f} B",
              "active_params": f"{r['active_params'] / 1e9:.3f} B"} for r in rows]
    emit(table, fmt, columns=columns)
