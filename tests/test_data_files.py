"""The bundled data files read through tracker.core.data_files (pkgutil) are the files as
importlib.resources reads them."""

from __future__ import annotations

import json
from decimal import Decimal
from importlib import resources

import pytest

from tracker.core.data_files import read_json, read_text

NAMES = sorted(p.name for p in resources.files("data").iterdir() if p.name.endswith(".json"))


def test_every_bundled_json_file_is_read():
    assert {"gpus.json", "economics.json", "providers.json", "models.json"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_data_file_reads_as_importlib_resources_reads_it(name):
    text = resources.files("data").joinpath(name).read_text("utf-8")
    assert read_text(name).replace("\r\n", "\n") == text
    assert read_json(name) == json.loads(text)


def test_json_options_reach_the_parser():
    exact = read_json("calibration.json", parse_float=Decimal)["compute_mfu"]["a100-80gb"]
    plain = read_json("calibration.json")["compute_mfu"]["a100-80gb"]
    assert isinstance(exact["value"], Decimal) and isinstance(plain["value"], float)
    assert exact["value"] == Decimal(repr(plain["value"]))


def test_a_missing_file_is_an_error():
    with pytest.raises(FileNotFoundError):
        read_text("no-such-file.json")


def test_the_demo_focus_sample_is_what_its_script_writes():
    """data/focus-usage-example.csv is tools/focus_sample.py's output, byte for byte (the
    script's docstring says how it is made)."""
    from tools.focus_sample import render
    from tracker.core.data_files import read_text

    assert read_text("focus-usage-example.csv") == render()
