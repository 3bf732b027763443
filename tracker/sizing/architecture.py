"""Model architectures: `ModelSpec`, its counts derived from config.json-style fields
(`build_model`), and the rough `--params` stand-in.

Parameter counts are computed from the architecture (docs/sizing.md §1.1; the same GQA,
gated-MLP and tied-embedding terms as Megatron's `theoretical_memory_usage.py` and
llm-analysis), never typed in, so "7B" becomes 6.74 B for Llama-2-7B and 7.24 B for Mistral-7B.
The presets and name lookup live in `models`, the config.json reader in `hf_config`; both
build on this module, which imports neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from tracker.core.errors import InvalidInput


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
    # Mixture of experts, MLA and shipped quantisation (defaults: a dense GQA model in bf16)
    moe_layers: float = 0.0  # layers whose MLP is routed experts
    shared_experts: int = 0
    routed_params: float = 0.0  # every routed expert of every MoE layer
    active_intermediate: float = 0.0  # MLP width a token passes through in an MoE layer
    kv_lora_rank: int = 0  # MLA: the cached latent is kv_lora_rank + qk_rope_head_dim
    qk_rope_head_dim: int = 0
    quant_method: str | None = None  # quantization_config.quant_method as shipped
    quant_bits: float = 16.0  # bits per quantised weight, scales included
    quant_params: float = 0.0  # parameters stored at quant_bits (the rest in 16 bits)
    native_precision: str = "bf16"  # the engine precision the shipped weights compute at
    source: str = ""  # where the architecture came from (a bundled or a local config.json)
    # Group-limited routing (DeepSeek-V3 `n_group`, `topk_group`): the routed experts form
    # `routing_groups` groups and a token's top-k come from at most `groups_per_token` of them
    # (0: no limit). Placed one group per node it is node-limited routing (arXiv 2412.19437
    # §2.1.2: at most M = 4 nodes per token), which bounds the all-to-all across nodes.
    routing_groups: int = 0
    groups_per_token: int = 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention(self) -> str:
        """gqa (MHA and MQA included), mla, sliding (every layer) or sliding+full."""
        if self.is_mla:
            return "mla"
        if self.sliding_layers:
            return "sliding" if self.sliding_layers >= self.layers else "sliding+full"
        return "gqa"

    @property
    def kv_elements_per_token_layer(self) -> float:
        """Elements one token stores in one layer: 2 × kv_heads × head_dim (K and V), or MLA's
        latent kv_lora_rank + qk_rope_head_dim (DeepSeek-V2, arXiv 2405.04434 §2.1.2)."""
        if self.kv_lora_rank:
            return float(self.kv_lora_rank + self.qk_rope_head_dim)
        return 2.0 * self.kv_heads * self.head_dim

    @property
    def kv_shards(self) -> float:
        """How many ways tensor parallelism can split the KV cache: the KV heads, or 1 for
        MLA, whose latent every TP rank keeps whole (vLLM and SGLang replicate it)."""
        return 1.0 if self.kv_lora_rank else self.kv_heads

    @property
    def mlp_intermediate_per_token(self) -> float:
        """The MLP width one token's activations hold: top-k experts plus the shared ones."""
        if self.active_intermediate:
            return self.active_intermediate
        return self.intermediate * self.experts_per_token

    def sixteen_bit_params(self, precision: str) -> float:
        """Decoder parameters a checkpoint at `precision` keeps in 16 bits beside the ones it
        quantises (0: every decoder matrix at `precision`). NVIDIA ModelOpt's NVFP4 recipe for
        the DeepSeek-V3 architecture (MLA) leaves attention unquantised: its
        examples/deepseek/ptq.py sets `"*attn*": {"enable": False}` unless MLA quantisation is
        asked for, and quantize_to_nvfp4.py writes the unquantised weights as the BF16 it
        dequantised them to (NVIDIA/TensorRT-Model-Optimizer @ 1030a221 and 1ef1d72a); the
        exports list every layer's `self_attn*` in exclude_modules (nvidia/DeepSeek-R1-NVFP4
        hf_quant_config.json), and TensorRT-LLM tech blog 1 runs its "64x Attention Modules"
        in bf16 (@ 01c4ece9). For DeepSeek-R1, 11.4 B parameters in 16 bits: ~397 GB in all
        (NVIDIA: "about 400 GB") and ~72 GB of weights per GPU under attention DP 8 (tech
        blog 3: "about 80 GB" of weights and activations; 56 GB with attention in FP4). GQA
        models' NVFP4 exports quantise attention (nvidia/Llama-3.3-70B-Instruct-FP4 excludes
        only lm_head), so they keep none (docs/serving.md "Weights a checkpoint keeps")."""
        if precision == "fp4" and self.is_mla:
            return self.attn_params * self.layers
        return 0.0

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
            "shared_experts": self.shared_experts, "attention": self.attention,
            "sliding_window": self.sliding_window,
            "kv_cache_bytes_per_token_bf16": round(2 * self.layers
                                                       * self.kv_elements_per_token_layer),
            "quantization": self.quant_method, "source": self.source,
            "published_params": self.published_params, "sources": list(self.sources),
        }


def build_model(
    *, id: str, name: str | None = None, layers: int, hidden: int, heads: int,
    kv_heads: int | None = None, head_dim: int | None = None, intermediate: int | None = None,
    vocab: int = 32000, tied_embeddings: bool = False, experts: int = 1,
    experts_per_token: int = 1, qkv_bias: bool = False, mlp: str = "gated",
    norms_per_layer: int = 2, max_context: int | None = None,
    max_context_extended: int | None = None, sliding_window: int | None = None,
    sliding_window_layers: str | int = "none", hf_id: str | None = None,
    aliases: tuple[str, ...] = (), sources: tuple[str, ...] = (),
    published_params: str | None = None,
    moe_intermediate: int | None = None, moe_layers: int | None = None,
    dense_intermediate: int | None = None, shared_experts: int = 0,
    shared_intermediate: int | None = None, shared_expert_gate: bool = False,
    o_bias: bool = False, expert_bias: bool = False, router_bias: bool = False,
    qk_norm: bool = False, attention_sinks: bool = False,
    q_lora_rank: int | None = None, kv_lora_rank: int | None = None,
    qk_nope_head_dim: int | None = None, qk_rope_head_dim: int | None = None,
    v_head_dim: int | None = None, quant_method: str | None = None, quant_bits: float = 16.0,
    quant_scope: str = "linear", native_precision: str = "bf16", source: str = "",
    routing_groups: int = 0, groups_per_token: int = 0,
) -> ModelSpec:
    """A ModelSpec from config.json-style fields, with every count derived (docs/sizing.md §1.1).

    Mixture of experts: `experts` routed experts of width `moe_intermediate` (default
    `intermediate`, Mixtral's convention) in `moe_layers` layers (default all), the rest dense
    of width `dense_intermediate`; `shared_experts` always-on experts of total width
    `shared_intermediate`. MLA (`kv_lora_rank` set): DeepSeek-V2's low-rank Q and KV
    projections (arXiv 2405.04434 §2.1), as HF's DeepseekV3Attention holds them.
    """
    kv_heads, head_dim = _heads(layers, hidden, heads, kv_heads, head_dim, kv_lora_rank,
                                qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
    if intermediate is None:
        # Llama's rule for a SwiGLU MLP: 2/3 of 4h, rounded up to a multiple of 256.
        intermediate = 256 * math.ceil(8 * hidden / 3 / 256) if mlp == "gated" else 4 * hidden
    n_moe = _moe_layers(layers, experts, experts_per_token, mlp, moe_layers, shared_experts)
    moe, gated = experts > 1, mlp == "gated"
    attn, attn_matrices = _attention_params(
        hidden, heads, kv_heads, head_dim, qkv_bias, o_bias, qk_norm, attention_sinks,
        q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim)
    per_matrix = 3 if gated else 2
    width = moe_intermediate if (moe and moe_intermediate) else intermediate
    mlp_params, router, shared_width, shared = _mlp_params(
        hidden, width, per_matrix, experts, expert_bias, router_bias, shared_experts,
        shared_intermediate, shared_expert_gate)
    dense_mlp = per_matrix * hidden * (dense_intermediate or intermediate)
    norms = norms_per_layer * hidden
    layer = attn + experts * mlp_params + router + norms + shared
    active_layer = attn + experts_per_token * mlp_params + router + norms + shared
    embedding = vocab * hidden * (1 if tied_embeddings else 2)
    dense_layers = layers - n_moe if moe else 0
    total, active = _totals(layers, n_moe, dense_layers, layer, active_layer,
                            attn + dense_mlp + norms, embedding, hidden)  # hidden: final norm
    routed = n_moe * experts * mlp_params
    linear, quantized = _linear_params(layers, n_moe, dense_layers, experts, attn_matrices,
                                       mlp_params, routed, per_matrix * hidden * shared_width,
                                       dense_mlp, quant_scope)
    sliding_layers = _sliding_layers(layers, sliding_window, sliding_window_layers)
    return ModelSpec(
        id=id, name=name or id, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, intermediate=width, vocab=vocab,
        tied_embeddings=tied_embeddings, experts=experts, experts_per_token=experts_per_token,
        qkv_bias=qkv_bias, gated_mlp=gated, norms_per_layer=norms_per_layer,
        max_context=max_context, max_context_extended=max_context_extended,
        sliding_window=sliding_window if sliding_layers else None, sliding_layers=sliding_layers,
        hf_id=hf_id, aliases=tuple(aliases), sources=tuple(sources),
        published_params=published_params, rough=False,
        attn_params=attn, mlp_params=mlp_params, router_params=router, norm_params=norms,
        layer_params=(total - embedding - hidden) / layers if (moe and dense_layers)
        else layer,
        active_layer_params=active_layer, embedding_params=embedding,
        params=total, active_params=active, linear_params=linear,
        moe_layers=n_moe, shared_experts=shared_experts, routed_params=routed,
        active_intermediate=(experts_per_token * width + shared_width) if moe else 0.0,
        kv_lora_rank=kv_lora_rank or 0,
        qk_rope_head_dim=(qk_rope_head_dim or 0) if kv_lora_rank else 0,
        quant_method=quant_method, quant_bits=quant_bits,
        quant_params=quantized if quant_method else 0.0,
        native_precision=native_precision, source=source,
        routing_groups=routing_groups if moe and groups_per_token else 0,
        groups_per_token=groups_per_token if moe and routing_groups else 0,
    )


def _heads(layers: int, hidden: int, heads: int, kv_heads: int | None, head_dim: int | None,
           kv_lora_rank: int | None, qk_nope_head_dim: int | None,
           qk_rope_head_dim: int | None, v_head_dim: int | None) -> tuple[int, int]:
    """(KV heads, head dimension), the shape checked: MLA's head is its no-RoPE and RoPE
    parts; otherwise the given one, or hidden / heads."""
    for label, value in (("layers", layers), ("hidden", hidden), ("heads", heads)):
        if value is None or value < 1:
            raise InvalidInput(f"--{label} must be a positive integer")
    kv_heads = heads if kv_heads is None else kv_heads
    if kv_heads < 1 or heads % kv_heads:
        raise InvalidInput(f"--kv-heads {kv_heads} must divide --heads {heads}")
    if kv_lora_rank:
        for label, dim in (("qk_nope_head_dim", qk_nope_head_dim),
                           ("qk_rope_head_dim", qk_rope_head_dim), ("v_head_dim", v_head_dim)):
            if not isinstance(dim, int) or dim < 1:
                raise InvalidInput(f"MLA needs a positive {label}")
        assert qk_nope_head_dim is not None and qk_rope_head_dim is not None
        head_dim = qk_nope_head_dim + qk_rope_head_dim
    if head_dim is None:
        if hidden % heads:
            raise InvalidInput(f"--hidden {hidden} is not a multiple of --heads {heads}; "
                               "give --head-dim")
        head_dim = hidden // heads
    return kv_heads, head_dim


def _moe_layers(layers: int, experts: int, experts_per_token: int, mlp: str,
                moe_layers: int | None, shared_experts: int) -> int:
    """The layers whose MLP is routed experts (0 for a dense model), the expert flags
    checked."""
    if experts < 1 or not 1 <= experts_per_token <= experts:
        raise InvalidInput("experts_per_token must be between 1 and the number of experts")
    if mlp not in ("gated", "plain"):
        raise InvalidInput(f"unknown MLP kind {mlp!r} (gated or plain)")
    n_moe = (layers if moe_layers is None else moe_layers) if experts > 1 else 0
    if not 0 <= n_moe <= layers:
        raise InvalidInput(f"moe_layers {n_moe} is not between 0 and the {layers} layers")
    if shared_experts < 0:
        raise InvalidInput("shared experts cannot be negative")
    return n_moe


def _attention_params(hidden: int, heads: int, kv_heads: int, head_dim: int, qkv_bias: bool,
                      o_bias: bool, qk_norm: bool, attention_sinks: bool,
                      q_lora_rank: int | None, kv_lora_rank: int | None,
                      qk_rope_head_dim: int | None,
                      v_head_dim: int | None) -> tuple[int, int]:
    """(parameters, of which matrices) of one layer's attention: GQA, or MLA's low-rank
    projections (q: hidden -> q_lora (+ its norm) -> heads x (nope + rope), or hidden -> ...)."""
    q_out = heads * head_dim
    kv_out = kv_heads * head_dim
    if kv_lora_rank:
        assert qk_rope_head_dim is not None and v_head_dim is not None
        q = (hidden * q_lora_rank + q_lora_rank + q_lora_rank * q_out) if q_lora_rank \
            else hidden * q_out
        kv = hidden * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank \
            + kv_lora_rank * heads * (head_dim - qk_rope_head_dim + v_head_dim)
        o = heads * v_head_dim * hidden
        attn_matrices = q + kv + o - (q_lora_rank or 0) - kv_lora_rank  # norms are not matrices
        attn = q + kv + o
    else:
        attn_matrices = hidden * q_out + 2 * hidden * kv_out + q_out * hidden
        attn = attn_matrices
        if qkv_bias:
            attn += q_out + 2 * kv_out
    if o_bias:
        attn += hidden
    if qk_norm:
        attn += 2 * head_dim
    if attention_sinks:
        attn += heads
    return attn, attn_matrices


def _mlp_params(hidden: int, width: int, per_matrix: int, experts: int, expert_bias: bool,
                router_bias: bool, shared_experts: int, shared_intermediate: int | None,
                shared_expert_gate: bool) -> tuple[int, int, int, int]:
    """(one expert's MLP, the router, the shared experts' width, their parameters) of a
    layer: a gated MLP has three matrices, a plain one two."""
    mlp_params = per_matrix * hidden * width
    if expert_bias:
        mlp_params += (2 if per_matrix == 3 else 1) * width + hidden
    router = (hidden * experts + (experts if router_bias else 0)) if experts > 1 else 0
    shared_width = (shared_intermediate if shared_intermediate is not None
                    else shared_experts * width) if shared_experts else 0
    shared = per_matrix * hidden * shared_width + (hidden if shared_expert_gate else 0)
    return mlp_params, router, shared_width, shared


def _linear_params(layers: int, n_moe: int, dense_layers: int, experts: int,
                   attn_matrices: int, mlp_params: int, routed: int, shared_matrices: int,
                   dense_mlp: int, quant_scope: str) -> tuple[int, int]:
    """(decoder-layer matrices, of which stored quantised): the routed experts, the MLPs or
    every matrix, as the shipped quantisation's scope says."""
    if experts > 1:
        linear = layers * attn_matrices + routed + n_moe * shared_matrices \
            + dense_layers * dense_mlp
    else:
        linear = layers * (attn_matrices + experts * mlp_params)
    quantized = routed if quant_scope == "experts" else (
        linear - layers * attn_matrices if quant_scope == "mlp" else linear)
    return linear, quantized


def _totals(layers: int, n_moe: int, dense_layers: int, layer: int, active_layer: int,
            dense_layer: int, embedding: int, final_norm: int) -> tuple[int, int]:
    """(total, active) parameters: the MoE and dense layers (dense_layers: those of an MoE
    model without experts), the embeddings, the final norm."""
    if dense_layers:
        total = n_moe * layer + dense_layers * dense_layer + embedding + final_norm
        active = n_moe * active_layer + dense_layers * dense_layer + embedding + final_norm
        return total, active
    return layers * layer + embedding + final_norm, \
        layers * active_layer + embedding + final_norm


def _sliding_layers(layers: int, sliding_window: int | None,
                    sliding_window_layers: str | int) -> int:
    """How many layers attend within the sliding window: a count, none, all, or every other
    (Gemma-2: even-numbered layers are local)."""
    if isinstance(sliding_window_layers, int) and not isinstance(sliding_window_layers, bool):
        if not 0 <= sliding_window_layers <= layers:
            raise InvalidInput(f"sliding-window layers {sliding_window_layers} is not between 0 "
                               f"and the {layers} layers")
        return sliding_window_layers if sliding_window else 0
    if sliding_window_layers not in ("none", "all", "alternate"):
        raise InvalidInput(f"unknown sliding_window_layers {sliding_window_layers!r}")
    if sliding_window is None or sliding_window_layers == "none":
        return 0
    if sliding_window_layers == "all":
        return layers
    return layers // 2 + layers % 2


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
