"""Published training runs, timed with no plan flags and no --mfu: within ±35 % of their
GPU-hours. Runs and sources: data/calibration.json; method: docs/calibration-training.md.
'fit' runs set a default (compute MFU per GPU); 'check' runs were not used to fit anything.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tracker.sizing import SizingRequest, size_workload

TABLE = json.loads(resources.files("data").joinpath("calibration.json").read_text("utf-8"))
TOLERANCE = 0.35


@pytest.mark.parametrize("run", TABLE["runs"], ids=lambda r: r["name"])
def test_published_run_within_35_percent_of_its_gpu_hours(run):
    fields = {k: run[k] for k in ("model", "params", "gpu", "count", "seq_len",
                                   "global_batch_tokens", "tokens", "cluster_gbps") if k in run}
    res = size_workload(SizingRequest(workload="pretrain", **fields))
    assert res.fits and res.plan == "fastest" and res.mfu_source == "modeled"
    assert res.gpu_hours == pytest.approx(run["gpu_hours"], rel=TOLERANCE), run["source"]


def test_every_default_has_a_source():
    for gpu, row in TABLE["compute_mfu"].items():
        assert 0 < row["value"] < 1 and row["source"], gpu
    assert all(run["source"] and run["role"] in ("fit", "check") for run in TABLE["runs"])
