"""Fit a GPU class's serving shares (data/serving.json) to its published measurements.

    python tools/fit_serving.py blackwell          # grid fit, residuals of every row
    python tools/fit_serving.py ampere --show      # residuals at the shares in serving.json

The measurements are data/serving-measurements.json (each row cited, with its role). The fit
is the one docs/serving.md describes for the Hopper class: a grid of step 0.05 over the HBM
bandwidth share and the prefill and decode compute shares, least squares on the log error of
the "fit" rows; "check" and "bias" rows are only reported. Nothing is written: copy the
shares into data/serving.json, and the residuals into docs/serving.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker.sizing import SizingRequest, serving_step  # noqa: E402
from tracker.sizing.replica import hardware_for  # noqa: E402
from tracker.sizing.serving import ServingSpec, serve  # noqa: E402

STEP = 0.05
BANDWIDTH = [round(0.20 + STEP * i, 2) for i in range(16)]  # 0.20 .. 0.95
PREFILL = [round(0.10 + STEP * i, 2) for i in range(17)]  # 0.10 .. 0.90
DECODE = [round(0.10 + STEP * i, 2) for i in range(19)]  # 0.10 .. 1.00


def measurements(gpu_class: str) -> list[dict]:
    data = json.loads((ROOT / "data" / "serving-measurements.json").read_text("utf-8"))
    return [row for row in data["rows"] if row["class"] == gpu_class]


def predict(row: dict) -> float:
    req = SizingRequest(model=row["model"], gpu=row["gpu"], count=row["tp"],
                        tensor_parallel=row["tp"], precision=row["precision"],
                        kv_precision=row["kv_precision"], gpus_per_node=max(8, row["tp"]))
    spec = ServingSpec(prompt_tokens=row["prompt"], output_tokens=row["output"],
                       concurrency=row.get("concurrency"),
                       attention_parallel=row.get("attention_parallel"))
    return serve(req, spec).output_tokens_per_s


def with_shares(gpu_class: str, bandwidth: float, prefill: float, decode: float) -> None:
    """Set the class's shares in the loaded serving data (this process only)."""
    cls = serving_step._serving_data()["classes"][gpu_class]
    cls.update(bandwidth_share=bandwidth, prefill_compute_share=prefill,
               decode_compute_share=decode)
    serving_step.calibration_for.cache_clear()
    hardware_for.cache_clear()


def loss(rows: list[dict]) -> float:
    return sum(math.log(predict(r) / r["output_tokens_per_s"]) ** 2 for r in rows)


def report(rows: list[dict]) -> None:
    for row in rows:
        value = predict(row)
        layout = "DP" if row.get("attention_parallel") == "data" else "TP"
        print(f"  {row['role']:5} {row['gpu']:13} {row['model']:16} {layout}{row['tp']} "
              f"{row['prompt']}/{row['output']}"
              + (f" B={row['concurrency']}" if row.get("concurrency") else "")
              + f": measured {row['output_tokens_per_s']:>9,.0f} "
              f"model {value:>9,.0f} ({value / row['output_tokens_per_s'] - 1:+.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gpu_class")
    parser.add_argument("--show", action="store_true", help="residuals at the current shares")
    args = parser.parse_args()
    rows = measurements(args.gpu_class)
    if not rows:
        raise SystemExit(f"no measurements for class {args.gpu_class!r}")
    fit_rows = [r for r in rows if r["role"] == "fit"]
    if not args.show:
        best = min(itertools.product(BANDWIDTH, PREFILL, DECODE),
                   key=lambda shares: (with_shares(args.gpu_class, *shares), loss(fit_rows))[1])
        with_shares(args.gpu_class, *best)
        print(f"{args.gpu_class}: bandwidth_share {best[0]}, prefill_compute_share {best[1]}, "
              f"decode_compute_share {best[2]} ({len(fit_rows)} fit rows)")
    report(rows)


if __name__ == "__main__":
    main()
