"""Models from their Hugging Face `config.json`: the architecture sizing needs, read without
`transformers` and without the network (the file is local).

`spec_from_config` is pure (a parsed config in, a `ModelSpec` out); `load_model_config` reads
a file (or a directory holding `config.json`) once per path, size and modification time. The
keys read per `model_type`, and what each becomes, are in docs/sizing.md §1.12; the names
follow each model's `configuration_*.py` in huggingface/transformers. Unknown extra keys are
ignored; an unknown `model_type`, a missing or a non-positive size is one line naming it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.sizing.architecture import ModelSpec, build_model
from tracker.sizing.memory import WEIGHT_BITS


class BadModelConfig(InvalidInput):
    """A config.json the reader cannot use: a usage error (exit 2), as a bad flag is."""

    usage = True


# The MoE and attention families each model_type belongs to (kimi_k2 is the model_type
# Moonshot's Kimi K2 config.json carries; transformers reads it as deepseek_v3).
SUPPORTED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
             "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "gemma2", "gemma3",
             "gemma3_text", "llama4", "llama4_text", "glm4_moe", "phi3")

# transformers' defaults for tie_word_embeddings where the config leaves it out.
_TIED_DEFAULT = {"gemma2": True, "gemma3": True, "gemma3_text": True}


class _Reader:
    """Typed access to one config's keys, each failure one line naming the key."""

    def __init__(self, raw: Mapping[str, Any], where: str, model_type: str) -> None:
        self.raw, self.where, self.model_type = raw, where, model_type

    def fail(self, text: str) -> BadModelConfig:
        return BadModelConfig(f"{self.where}: {text}")

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def integer(self, key: str, default: int | None = None, *, minimum: int = 1) -> int:
        value = self.raw.get(key)
        if value is None:
            if default is None:
                raise self.fail(f"{self.model_type} config lacks {key!r}")
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise self.fail(f"{key} must be an integer, got {value!r}")
        if value < minimum:
            raise self.fail(f"{key} must be at least {minimum}, got {value!r}")
        return int(value)

    def opt_int(self, key: str, *, minimum: int = 1) -> int | None:
        return self.integer(key, minimum=minimum) if self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(f"{key} must be true or false, got {value!r}")
        return value

    def int_list(self, key: str) -> list[int] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.fail(f"{key} must be a list of integers")
        return value


def _layer_types(r: _Reader, layers: int) -> list[str] | None:
    value = r.raw.get("layer_types")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise r.fail("layer_types must be a list of strings")
    if len(value) != layers:
        raise r.fail(f"layer_types has {len(value)} entries for {layers} layers")
    return value


def _sliding(r: _Reader, layers: int, default: str) -> tuple[int | None, int]:
    """(window, how many layers use it). `default`: all | alternate | pattern | none, for a
    config without `layer_types`."""
    window = r.opt_int("sliding_window")
    types = _layer_types(r, layers)
    if window is None:
        return None, 0
    if types is not None:
        return window, sum(1 for t in types if t.startswith("sliding"))
    if default == "all":
        return window, layers
    if default == "alternate":  # Gemma 2: even-numbered layers are local
        return window, layers // 2 + layers % 2
    if default == "pattern":  # Gemma 3: every n-th layer global, the others local
        pattern = r.integer("sliding_window_pattern", 6)
        return window, layers - layers // pattern
    return None, 0


def _quantization(r: _Reader) -> dict[str, Any]:
    """The weights' bytes as shipped: quant_method, bits per quantised weight with their
    scales, which weights, and the precision they compute at (docs/sizing.md §1.12)."""
    q = r.raw.get("quantization_config")
    dtype = str(r.raw.get("torch_dtype") or r.raw.get("dtype") or "bfloat16")
    native = {"float32": "fp32", "float16": "fp16"}.get(dtype, "bf16")
    if q is None:
        return {"native_precision": native}
    if not isinstance(q, Mapping):
        raise r.fail("quantization_config must be an object")
    method = str(q.get("quant_method") or "")
    skipped = " ".join(str(m) for m in q.get("modules_to_not_convert") or ())
    if method == "fp8":
        block = q.get("weight_block_size")
        bits = 8.0
        if block is not None:
            if not (isinstance(block, list) and len(block) == 2
                    and all(isinstance(b, int) and b > 0 for b in block)):
                raise r.fail("quantization_config.weight_block_size must be two positive "
                             "integers")
            bits += 32.0 / (block[0] * block[1])  # one fp32 scale per block
        return {"quant_method": "fp8", "quant_bits": bits, "native_precision": "fp8",
                "quant_scope": "linear"}
    if method == "mxfp4":
        # OCP MX: 32 FP4 (E2M1) elements share one 8-bit E8M0 scale: 4.25 bits per weight.
        scope = "experts" if "attn" in skipped else "linear"
        return {"quant_method": "mxfp4", "quant_bits": WEIGHT_BITS["mxfp4"],
                "native_precision": "mxfp4",
                "quant_scope": scope}
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit", 4))
        group = q.get("group_size", q.get("q_group_size", 128))
        if bits not in (4, 8) or not isinstance(group, int) or (group < 1 and group != -1):
            raise r.fail(f"{method} quantization_config needs bits 4 or 8 and a positive "
                         f"group_size, got bits {bits!r}, group_size {group!r}")
        # A 16-bit scale and a `bits`-wide zero point per group (per output channel for -1).
        per_group = 0.0 if group == -1 else (16.0 + bits) / group
        return {"quant_method": method, "quant_bits": bits + per_group,
                "native_precision": "int4" if bits == 4 else "int8", "quant_scope": "linear"}
    raise r.fail(f"quantization_config.quant_method {method!r} is not supported (fp8, mxfp4, "
                 "awq, gptq)")


def _dense(r: _Reader, *, qkv_bias: bool = False, o_bias: bool = False, qk_norm: bool = False,
           sliding: str = "none", norms: int = 2) -> dict[str, Any]:
    layers = r.integer("num_hidden_layers")
    window, sliding_layers = _sliding(r, layers, sliding)
    return dict(
        layers=layers, hidden=r.integer("hidden_size"), heads=r.integer("num_attention_heads"),
        kv_heads=r.opt_int("num_key_value_heads"), head_dim=r.opt_int("head_dim"),
        intermediate=r.integer("intermediate_size"), vocab=r.integer("vocab_size"),
        tied_embeddings=r.flag("tie_word_embeddings", _TIED_DEFAULT.get(r.model_type, False)),
        max_context=r.opt_int("max_position_embeddings"), qkv_bias=qkv_bias, o_bias=o_bias,
        qk_norm=qk_norm, sliding_window=window, sliding_window_layers=sliding_layers,
        norms_per_layer=norms,
    )


def _moe_layers(layers: int, *, first_dense: int = 0, every: int = 1, offset: int = 0,
                dense: list[int] | None = None) -> int:
    """How many layers are MoE: from `first_dense` on, every `every`-th (HF's
    `layer_idx % moe_layer_freq == 0` for DeepSeek, `(layer_idx + 1) % decoder_sparse_step == 0`
    for Qwen, `offset` = 1 for the latter), minus the listed dense ones."""
    skip = set(dense or ())
    return sum(1 for i in range(first_dense, layers)
               if (i + offset) % every == 0 and i not in skip)


def _llama(r: _Reader) -> dict[str, Any]:
    bias = r.flag("attention_bias", False)
    return _dense(r, qkv_bias=bias, o_bias=bias)


def _mistral(r: _Reader) -> dict[str, Any]:
    return _dense(r, sliding="all")


def _mixtral(r: _Reader) -> dict[str, Any]:
    out = _dense(r, sliding="all")
    out.update(experts=r.integer("num_local_experts"),
               experts_per_token=r.integer("num_experts_per_tok"))
    return out


def _qwen2(r: _Reader) -> dict[str, Any]:
    out = _dense(r, qkv_bias=True)
    _qwen_window(r, out)
    return out


def _qwen_window(r: _Reader, out: dict[str, Any]) -> None:
    """Qwen's sliding window applies only with use_sliding_window, to the layers from
    max_window_layers on (Qwen2/Qwen3 configuration docstrings)."""
    if r.flag("use_sliding_window", False) and r.has("sliding_window"):
        first = r.integer("max_window_layers", out["layers"], minimum=0)
        out["sliding_window"] = r.integer("sliding_window")
        out["sliding_window_layers"] = max(0, out["layers"] - first)
    else:
        out["sliding_window"], out["sliding_window_layers"] = None, 0


def _qwen_moe(r: _Reader, out: dict[str, Any]) -> dict[str, Any]:
    experts = r.integer("num_experts", 0, minimum=0)
    if experts > 1:
        out.update(experts=experts, experts_per_token=r.integer("num_experts_per_tok"),
                   moe_intermediate=r.integer("moe_intermediate_size"),
                   moe_layers=_moe_layers(out["layers"], every=r.integer("decoder_sparse_step", 1),
                                          offset=1, dense=r.int_list("mlp_only_layers")))
    return out


def _qwen2_moe(r: _Reader) -> dict[str, Any]:
    out = _qwen_moe(r, _dense(r, qkv_bias=True))
    _qwen_window(r, out)
    shared = r.integer("shared_expert_intermediate_size", 0, minimum=0)
    if shared:
        out.update(shared_experts=1, shared_intermediate=shared, shared_expert_gate=True)
    return out


def _qwen3(r: _Reader) -> dict[str, Any]:
    bias = r.flag("attention_bias", False)
    out = _dense(r, qkv_bias=bias, o_bias=bias, qk_norm=True)
    _qwen_window(r, out)
    return out


def _qwen3_moe(r: _Reader) -> dict[str, Any]:
    return _qwen_moe(r, _qwen3(r))


def _deepseek(r: _Reader) -> dict[str, Any]:
    out = _dense(r)
    experts = r.integer("n_routed_experts", 0, minimum=0)
    kv_lora = r.integer("kv_lora_rank")
    out.update(q_lora_rank=r.opt_int("q_lora_rank"), kv_lora_rank=kv_lora,
               qk_nope_head_dim=r.integer("qk_nope_head_dim"),
               qk_rope_head_dim=r.integer("qk_rope_head_dim"), v_head_dim=r.integer("v_head_dim"),
               head_dim=None, kv_heads=None, qkv_bias=False, o_bias=False)
    if experts > 1:
        shared = r.integer("n_shared_experts", 0, minimum=0)
        out.update(
            experts=experts, experts_per_token=r.integer("num_experts_per_tok"),
            moe_intermediate=r.integer("moe_intermediate_size"), shared_experts=shared,
            moe_layers=_moe_layers(out["layers"],
                                   first_dense=r.integer("first_k_dense_replace", 0, minimum=0),
                                   every=r.integer("moe_layer_freq", 1)),
            # Group-limited routing: top-k from at most topk_group of n_group groups.
            routing_groups=r.integer("n_group", 0, minimum=0),
            groups_per_token=r.integer("topk_group", 0, minimum=0),
            # noaux_tc routing keeps a per-expert score-correction bias (DeepSeek-V3 §2.1.2).
            router_bias=r.raw.get("topk_method") == "noaux_tc")
    return out


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    out = _dense(r, qkv_bias=True, o_bias=True)
    # Without layer_types, gpt-oss alternates sliding and full attention from layer 0.
    if out["sliding_window"] is not None and r.raw.get("layer_types") is None:
        out["sliding_window_layers"] = out["layers"] // 2 + out["layers"] % 2
    k = r.integer("num_experts_per_tok", r.integer("experts_per_token", 0, minimum=0) or None)
    out.update(experts=r.integer("num_local_experts"), experts_per_token=k, expert_bias=True,
               router_bias=True, attention_sinks=True)
    return out


def _gemma2(r: _Reader) -> dict[str, Any]:
    return _dense(r, sliding="alternate", norms=4)


def _gemma3(r: _Reader) -> dict[str, Any]:
    return _dense(r, sliding="pattern", norms=4, qk_norm=True)


def _llama4(r: _Reader) -> dict[str, Any]:
    out = _dense(r)
    layers = out["layers"]
    experts = r.integer("num_local_experts", 0, minimum=0)
    # RoPE layers use chunked local attention (attention_chunk_size): they hold at most one
    # chunk of KV, as a window does; every no_rope_layer_interval-th layer (default 4) is
    # global. no_rope_layers lists 1 for a RoPE layer (transformers' Llama4TextConfig).
    chunk = r.opt_int("attention_chunk_size")
    rope = r.int_list("no_rope_layers")
    if rope is not None and len(rope) == layers:
        local = sum(1 for v in rope if v)
    else:
        interval = r.integer("no_rope_layer_interval", 4)
        local = sum(1 for i in range(layers) if (i + 1) % interval != 0)
    out.update(sliding_window=chunk, sliding_window_layers=local if chunk else 0)
    if experts > 1:
        listed = r.int_list("moe_layers")
        step = r.integer("interleave_moe_layer_step", 1)
        moe = len(listed) if listed is not None else _moe_layers(layers, every=step, offset=1)
        out.update(experts=experts, experts_per_token=r.integer("num_experts_per_tok"),
                   moe_intermediate=out["intermediate"], moe_layers=moe, shared_experts=1,
                   dense_intermediate=r.integer("intermediate_size_mlp", out["intermediate"]))
    return out


def _glm4_moe(r: _Reader) -> dict[str, Any]:
    out = _dense(r, qkv_bias=r.flag("attention_bias", False),
                 qk_norm=r.flag("use_qk_norm", False))
    experts = r.integer("n_routed_experts", 0, minimum=0)
    if experts > 1:
        out.update(
            experts=experts, experts_per_token=r.integer("num_experts_per_tok"),
            moe_intermediate=r.integer("moe_intermediate_size"),
            shared_experts=r.integer("n_shared_experts", 0, minimum=0),
            moe_layers=_moe_layers(out["layers"],
                                   first_dense=r.integer("first_k_dense_replace", 0, minimum=0)),
            router_bias=True)  # e_score_correction_bias, as DeepSeek-V3's noaux_tc
    return out


def _phi3(r: _Reader) -> dict[str, Any]:
    return _dense(r, sliding="all")


_READERS: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "llama": _llama, "mistral": _mistral, "mixtral": _mixtral, "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe, "qwen3": _qwen3, "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "kimi_k2": _deepseek,
    "gpt_oss": _gpt_oss, "gemma2": _gemma2, "gemma3": _gemma3, "gemma3_text": _gemma3,
    "llama4": _llama4, "llama4_text": _llama4, "glm4_moe": _glm4_moe, "phi3": _phi3,
}
assert set(_READERS) == set(SUPPORTED)
# Multimodal configs nest the language model's keys under text_config.
_NESTED = ("gemma3", "llama4")


def spec_from_config(raw: Any, *, where: str = "config.json", id: str | None = None,
                     **extra: Any) -> ModelSpec:
    """The ModelSpec of a parsed config.json (`extra`: preset fields such as name, hf_id,
    aliases, sources, published_params)."""
    if not isinstance(raw, Mapping):
        raise BadModelConfig(f"{where}: a config.json is a JSON object")
    model_type = raw.get("model_type")
    if not isinstance(model_type, str):
        raise BadModelConfig(f"{where}: no model_type (supported: {', '.join(SUPPORTED)})")
    if model_type not in _READERS:
        raise BadModelConfig(f"{where}: unknown model_type {model_type!r} (supported: "
                             f"{', '.join(SUPPORTED)})")
    body: dict[str, Any] = dict(raw)
    if model_type in _NESTED and isinstance(raw.get("text_config"), Mapping):
        body = dict(raw["text_config"])
        for key in ("quantization_config", "torch_dtype", "tie_word_embeddings"):
            if key in raw and key not in body:
                body[key] = raw[key]
    r = _Reader(body, where, model_type)
    fields = _READERS[model_type](r)
    fields.update(_quantization(r))
    # The checkpoint's weights as HF stores them: the MTP module DeepSeek-V3 ships
    # (num_nextn_predict_layers) is a draft model, outside the published 671B.
    name = extra.pop("name", None) or (id or _name_of(raw) or model_type)
    fields.update(extra)
    try:
        return build_model(id=id or "model-config", name=name, source=extra.get("source") or where,
                           **{k: v for k, v in fields.items() if k != "source"})
    except BadModelConfig:
        raise
    except InvalidInput as exc:
        raise BadModelConfig(f"{where}: {exc}") from None


def _name_of(raw: Mapping[str, Any]) -> str | None:
    name = raw.get("_name_or_path")
    return name if isinstance(name, str) and name else None


def read_config_file(path: str) -> tuple[str, Any]:
    """(the file read, its parsed JSON) for a config.json or a directory holding one."""
    target = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        with open(target, "rb") as handle:
            data = handle.read(8 * 2**20 + 1)
    except FileNotFoundError:
        raise BadModelConfig(f"--model-config {path}: no such file") from None
    except OSError as exc:
        raise BadModelConfig(f"--model-config {path}: cannot read it ({exc.strerror})") from None
    if len(data) > 8 * 2**20:
        raise BadModelConfig(f"--model-config {target}: larger than 8 MiB; not a config.json")
    try:
        return target, json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadModelConfig(f"--model-config {target}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BadModelConfig(f"--model-config {target}: not valid JSON ({exc.msg} at line "
                             f"{exc.lineno} column {exc.colno})") from None


def load_model_config(path: str) -> ModelSpec:
    """The ModelSpec of a local config.json (or a directory holding one), read once per path,
    size and modification time."""
    target = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        stat = os.stat(target)
        stamp: tuple[int, int] = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        stamp = (-1, -1)
    return _load(path, stamp)


@lru_cache(maxsize=64)
def _load(path: str, _stamp: tuple[int, int]) -> ModelSpec:
    target, raw = read_config_file(path)
    base = _name_from_path(target)
    name = (_name_of(raw) if isinstance(raw, Mapping) else None) or base
    return spec_from_config(raw, where=target, id=_slug(name), name=name,
                            source=f"config.json: {target}")


def _name_from_path(target: str) -> str:
    """A model name from where its config.json sits: the file's own name (my-model.json),
    its directory (Qwen3-30B-A3B/config.json), or the Hugging Face cache's repository
    (models--Qwen--Qwen3-30B-A3B/snapshots/<revision>/config.json)."""
    absolute = os.path.abspath(target)
    if os.path.basename(absolute) != "config.json":
        return os.path.splitext(os.path.basename(absolute))[0]
    folder = os.path.dirname(absolute)
    parts = folder.split(os.sep)
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3].split("--")[-1]
    return os.path.basename(folder) or "model-config"


def _slug(text: str) -> str:
    tail = text.rstrip("/").split("/")[-1]
    out = "".join(c if c.isalnum() or c in ".-" else "-" for c in tail.lower()).strip("-")
    return out or "model-config"
