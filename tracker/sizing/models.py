"""Models by name: the bundled presets (data/models.json and the config.json files it names)
and their lookup, and the LoRA target names.

The architectures and their parameter counts are `architecture`'s (`ModelSpec`,
`build_model`, `rough_model`); a bundled config.json is read by `hf_config`.
"""

from __future__ import annotations

import difflib
import re
from functools import cache, lru_cache

from tracker.core.data_files import read_json
from tracker.core.errors import InvalidInput, NotFound
from tracker.sizing.architecture import ModelSpec, build_model

# The LoRA target names we understand, mapped to the HF module names they stand for.
LORA_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
_LORA_GROUPS = {
    "all-linear": LORA_MODULES,
    "all": LORA_MODULES,
    "attention": ("q", "k", "v", "o"),
    "attn": ("q", "k", "v", "o"),
    "mlp": ("gate", "up", "down"),
}
_LORA_ALIASES = {
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate",
    "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down",
    "wq": "q", "wk": "k", "wv": "v", "wo": "o",
}


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", text.lower()).replace(".", "")


_VARIANT_SUFFIX = re.compile(r"(-(instruct|chat|hf|it|base))+$", re.IGNORECASE)


@cache
def _presets() -> tuple[ModelSpec, ...]:
    raw = read_json("models.json")
    out = []
    for item in raw["models"]:
        fields = dict(item)
        fields["aliases"] = tuple(fields.get("aliases", ()))
        fields["sources"] = tuple(fields.get("sources", ()))
        config = fields.pop("config", None)
        if config is not None:
            from tracker.sizing.hf_config import spec_from_config

            out.append(spec_from_config(read_json(config), where=f"data/{config}",
                                        source=f"data/{config}", **fields))
        else:
            out.append(build_model(**fields, source="data/models.json"))
    return tuple(out)


@cache
def _preset_index() -> dict[str, ModelSpec]:
    index: dict[str, ModelSpec] = {}
    for spec in _presets():
        names = [spec.id, spec.name, *spec.aliases]
        if spec.hf_id:
            names += [spec.hf_id, spec.hf_id.split("/", 1)[1]]
        for alias in spec.aliases:
            if "/" in alias:
                names.append(alias.split("/", 1)[1])
        for name in names:
            index.setdefault(_key(name), spec)
    return index


def model_presets() -> tuple[ModelSpec, ...]:
    """Every bundled preset, in file order (parsed once)."""
    return _presets()


@lru_cache(maxsize=1024)
def resolve_model(name: str) -> ModelSpec:
    """A preset by id, name or Hugging Face id, case-insensitively.

    `Llama-3.1-70B`, `meta-llama/Llama-3.1-70B` and `meta-llama/Meta-Llama-3.1-70B-Instruct`
    all resolve to llama-3.1-70b (an -Instruct/-chat/-hf variant has the same architecture).
    Unknown names raise NotFound with the closest presets.
    """
    if not name or not name.strip():
        raise InvalidInput("give a model name (see `gpu-tracker models`)")
    index = _preset_index()
    text = name.strip()
    for candidate in (text, _VARIANT_SUFFIX.sub("", text)):
        for form in (candidate, candidate.split("/", 1)[-1]):
            found = index.get(_key(form))
            if found is not None:
                return found
    ids = [spec.id for spec in _presets()]
    short = _VARIANT_SUFFIX.sub("", text.split("/", 1)[-1]).lower()
    close = difflib.get_close_matches(short, ids, n=3, cutoff=0.4)
    hint = f"; closest presets: {', '.join(close)}" if close else ""
    raise NotFound(f"unknown model {name!r}{hint} (see `gpu-tracker models`, or give "
                   "--params or the architecture flags)")


def parse_lora_targets(text: str) -> tuple[str, ...]:
    """`all-linear`, `attention`, `mlp`, or a comma list such as `q,v` or `q_proj,v_proj`."""
    out: list[str] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        if part in _LORA_GROUPS:
            out.extend(_LORA_GROUPS[part])
            continue
        module = _LORA_ALIASES.get(part, part)
        if module not in LORA_MODULES:
            raise InvalidInput(
                f"unknown LoRA target {part!r} (use all-linear, attention, mlp or a list of "
                f"{', '.join(LORA_MODULES)})")
        out.append(module)
    if not out:
        raise InvalidInput("--lora-targets is empty")
    return tuple(dict.fromkeys(out))
