"""Model architectures: the bundled presets, architecture flags, and the rough `--params` path.

Parameter counts are computed from the architecture (docs/sizing.md §1.1; the same GQA,
gated-MLP and tied-embedding terms as Megatron's `theoretical_memory_usage.py` and
llm-analysis), never typed in, so "7B" becomes 6.74 B for Llama-2-7B and 7.24 B for Mistral-7B.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from functools import cache, lru_cache

from tracker.data_files import read_json
from tracker.errors import InvalidInput, NotFound

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


@dataclass(frozen=True, slots=True, eq=False)
class ModelSpec:
    """One model's architecture and the counts derived from it (all in parameters, not bytes).

    Compared and hashed by identity: presets are parsed once, so this keeps the engine's caches
    cheap.
    """

    id: str
    name: str
    layers: float  # a float only on the rough --params path
    hidden: float
    heads: float
    kv_heads: float
    head_dim: float
    intermediate: float
    vocab: int
    tied_embeddings: bool
    experts: int
    experts_per_token: int
    qkv_bias: bool
    gated_mlp: bool
    norms_per_layer: int
    max_context: int | None
    max_context_extended: int | None
    sliding_window: int | None
    sliding_layers: int  # how many layers use the sliding window (0, all, or every other)
    hf_id: str | None
    aliases: tuple[str, ...]
    sources: tuple[str, ...]
    published_params: str | None
    rough: bool
    # Derived counts
    attn_params: float
    mlp_params: float  # one expert
    router_params: float
    norm_params: float  # per layer
    layer_params: float  # all experts
    active_layer_params: float
    embedding_params: float  # input embedding + untied lm_head
    params: float
    active_params: float
    linear_params: float  # decoder-layer matrices: what weight quantisation applies to

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def kv_elements_per_token_layer(self) -> float:
        """K and V elements one token stores in one layer: 2 × kv_heads × head_dim."""
        return 2.0 * self.kv_heads * self.head_dim

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> float:
        """Trainable LoRA parameters: r·(d_in + d_out) per adapted matrix (docs/sizing.md §1.8)."""
        h, q_out, kv_out, inter = self.hidden, self.heads * self.head_dim, \
            self.kv_heads * self.head_dim, self.intermediate
        dims = {
            "q": h + q_out, "k": h + kv_out, "v": h + kv_out, "o": q_out + h,
            "gate": (h + inter) * self.experts, "up": (h + inter) * self.experts,
            "down": (inter + h) * self.experts,
        }
        return rank * self.layers * sum(dims[t] for t in targets)

    def summary(self) -> dict:
        return {
            "id": self.id, "name": self.name, "hf_id": self.hf_id,
            "params": round(self.params), "active_params": round(self.active_params),
            "layers": self.layers, "hidden": self.hidden, "heads": self.heads,
            "kv_heads": self.kv_heads, "head_dim": self.head_dim,
            "intermediate": self.intermediate, "vocab": self.vocab,
            "tied_embeddings": self.tied_embeddings, "experts": self.experts,
            "experts_per_token": self.experts_per_token, "max_context": self.max_context,
            "sliding_window": self.sliding_window,
            "kv_cache_bytes_per_token_bf16": round(2 * self.layers
                                                       * self.kv_elements_per_token_layer),
            "published_params": self.published_params, "sources": list(self.sources),
        }


def build_model(
    *, id: str, name: str | None = None, layers: int, hidden: int, heads: int,
    kv_heads: int | None = None, head_dim: int | None = None, intermediate: int | None = None,
    vocab: int = 32000, tied_embeddings: bool = False, experts: int = 1,
    experts_per_token: int = 1, qkv_bias: bool = False, mlp: str = "gated",
    norms_per_layer: int = 2, max_context: int | None = None,
    max_context_extended: int | None = None, sliding_window: int | None = None,
    sliding_window_layers: str = "none", hf_id: str | None = None,
    aliases: tuple[str, ...] = (), sources: tuple[str, ...] = (),
    published_params: str | None = None,
) -> ModelSpec:
    """A ModelSpec from config.json-style fields, with every count derived (docs/sizing.md §1.1)."""
    for label, value in (("layers", layers), ("hidden", hidden), ("heads", heads)):
        if value is None or value < 1:
            raise InvalidInput(f"--{label} must be a positive integer")
    kv_heads = heads if kv_heads is None else kv_heads
    if kv_heads < 1 or heads % kv_heads:
        raise InvalidInput(f"--kv-heads {kv_heads} must divide --heads {heads}")
    if head_dim is None:
        if hidden % heads:
            raise InvalidInput(f"--hidden {hidden} is not a multiple of --heads {heads}; "
                               "give --head-dim")
        head_dim = hidden // heads
    if intermediate is None:
        # Llama's rule for a SwiGLU MLP: 2/3 of 4h, rounded up to a multiple of 256.
        intermediate = 256 * math.ceil(8 * hidden / 3 / 256) if mlp == "gated" else 4 * hidden
    if experts < 1 or not 1 <= experts_per_token <= experts:
        raise InvalidInput("experts_per_token must be between 1 and the number of experts")
    if mlp not in ("gated", "plain"):
        raise InvalidInput(f"unknown MLP kind {mlp!r} (gated or plain)")
    gated = mlp == "gated"

    q_out = heads * head_dim
    kv_out = kv_heads * head_dim
    attn = hidden * q_out + 2 * hidden * kv_out + q_out * hidden
    if qkv_bias:
        attn += q_out + 2 * kv_out
    mlp_params = (3 if gated else 2) * hidden * intermediate
    router = hidden * experts if experts > 1 else 0
    norms = norms_per_layer * hidden
    layer = attn + experts * mlp_params + router + norms
    active_layer = attn + experts_per_token * mlp_params + router + norms
    embedding = vocab * hidden * (1 if tied_embeddings else 2)
    final_norm = hidden
    total = layers * layer + embedding + final_norm
    active = layers * active_layer + embedding + final_norm
    linear = layers * (hidden * q_out + 2 * hidden * kv_out + q_out * hidden
                       + experts * mlp_params)

    if sliding_window_layers not in ("none", "all", "alternate"):
        raise InvalidInput(f"unknown sliding_window_layers {sliding_window_layers!r}")
    if sliding_window is None or sliding_window_layers == "none":
        sliding_layers = 0
    elif sliding_window_layers == "all":
        sliding_layers = layers
    else:
        sliding_layers = layers // 2 + layers % 2  # Gemma-2: even-numbered layers are local

    return ModelSpec(
        id=id, name=name or id, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, intermediate=intermediate, vocab=vocab,
        tied_embeddings=tied_embeddings, experts=experts, experts_per_token=experts_per_token,
        qkv_bias=qkv_bias, gated_mlp=gated, norms_per_layer=norms_per_layer,
        max_context=max_context, max_context_extended=max_context_extended,
        sliding_window=sliding_window if sliding_layers else None, sliding_layers=sliding_layers,
        hf_id=hf_id, aliases=tuple(aliases), sources=tuple(sources),
        published_params=published_params, rough=False,
        attn_params=attn, mlp_params=mlp_params, router_params=router, norm_params=norms,
        layer_params=layer, active_layer_params=active_layer, embedding_params=embedding,
        params=total, active_params=active, linear_params=linear,
    )


@lru_cache(maxsize=4096)
def rough_model(params: float) -> ModelSpec:
    """A stand-in architecture for `--params N` alone.

    Shape of a dense Llama-like decoder with h/L = 128 and 12·h² parameters per layer
    (7e9 → h ≈ 4211, L ≈ 33). Kept continuous (not rounded) so that memory grows smoothly
    with N. All parameters count as decoder layers (no separate embedding); attention is
    taken as multi-head (KV heads = heads), so the KV cache is an upper bound.
    """
    if not params or params <= 0:
        raise InvalidInput("--params must be a positive number of parameters")
    hidden = (128.0 * params / 12.0) ** (1.0 / 3.0)
    layers = hidden / 128.0
    heads = hidden / 128.0
    layer = params / layers
    return ModelSpec(
        id=f"params-{params:.4g}", name=f"{params / 1e9:.3g}B parameters (rough)",
        layers=layers, hidden=hidden, heads=heads, kv_heads=heads, head_dim=128.0,
        intermediate=4.0 * hidden, vocab=32000, tied_embeddings=False, experts=1,
        experts_per_token=1, qkv_bias=False, gated_mlp=False, norms_per_layer=2,
        max_context=None, max_context_extended=None, sliding_window=None, sliding_layers=0,
        hf_id=None, aliases=(), sources=("rough path: shape assumed from the parameter count",),
        published_params=None, rough=True,
        attn_params=layer / 3.0, mlp_params=layer * 2.0 / 3.0, router_params=0.0,
        norm_params=0.0, layer_params=layer, active_layer_params=layer, embedding_params=0.0,
        params=float(params), active_params=float(params), linear_params=float(params),
    )


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
        out.append(build_model(**fields))
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
