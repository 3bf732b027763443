"""Memory formulas (bytes), each with the source it follows (see docs/sizing.md §1).

Everything here is in bytes. GB = 10**9 and GiB = 2**30 only appear when a number is shown.
"""

from __future__ import annotations

from tracker.core.errors import InvalidInput
from tracker.sizing.architecture import ModelSpec

GB = 10**9
GiB = 2**30

# "native": the weights as the model's config.json ships them (quantization_config)
PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "native")
KV_PRECISIONS = ("auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4")
OPTIMIZERS = ("adamw", "adamw-fp32grad", "adamw-bf16", "adam-8bit", "sgd", "adamw-deepseek")
SHARDINGS = ("none", "zero1", "zero2", "zero3", "fsdp")
OFFLOADS = ("none", "optimizer", "all")
ATTENTIONS = ("flash", "eager")
RECOMPUTES = ("none", "selective", "full")
CROSS_ENTROPIES = ("full", "chunked")
# torchtune's CEWithChunkedOutputLoss default (pytorch/torchtune
# torchtune/modules/loss/ce_chunked_output_loss.py@10ff7cd: num_output_chunks = 8).
CE_CHUNKS = 8
WORKLOADS = ("inference", "pretrain", "full-finetune", "lora", "qlora")
TRAINING_WORKLOADS = frozenset(("pretrain", "full-finetune", "lora", "qlora"))
ADAPTER_WORKLOADS = frozenset(("lora", "qlora"))

# Bits per weight for the quantised decoder matrices. Group-wise int4 carries an fp16 scale per
# group (+16/g bits); QLoRA's NF4 with double quantisation costs 0.127 bits/param of constants
# (arXiv 2305.14314 §3, docs/sizing.md §1.2). Embeddings, lm_head and norms stay in bf16.
#
# The two 4-bit float formats store E2M1 values in blocks with one shared scale per block:
# - fp4 is NVIDIA's NVFP4: an FP8 (E4M3) scale per 16 values, 4 + 8/16 = 4.5 bits, plus one
#   FP32 scale per tensor (negligible). NVIDIA, "Introducing NVFP4 for Efficient and Accurate
#   Low-Precision Inference" (developer.nvidia.com/blog, June 2025); TensorRT Model Optimizer
#   NVFP4 quantisation; Blackwell's 5th-generation tensor cores run it natively (W4A4).
# - mxfp4 is the OCP Microscaling format: an E8M0 scale per 32 values, 4 + 8/32 = 4.25 bits.
#   OCP "Microscaling Formats (MX) Specification v1.0" (Sept 2023) §5; gpt-oss ships its expert
#   weights in MXFP4 (openai/gpt-oss model card, arXiv 2508.10925).
WEIGHT_BITS = {"fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0, "int4": 4.0,
               "fp4": 4.0 + 8.0 / 16.0, "mxfp4": 4.0 + 8.0 / 32.0}
FP4_PRECISIONS = frozenset(("fp4", "mxfp4"))
QUANTISED_PRECISIONS = frozenset(("int8", "int4", "fp4", "mxfp4"))
NF4_BITS = 4.0 + 0.127
KV_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}

# Training model states per *trainable* parameter: (gradient bytes, optimizer bytes), with the
# weights at their working precision (2 bytes in mixed precision). docs/sizing.md §1.3:
#   adamw           2 + 2 + 12 (fp32 master, m, v)   = 16  ZeRO paper / DeepSpeed (the default)
#   adamw-fp32grad  2 + 4 + 12                       = 18  Megatron / HF "model memory anatomy"
#   adamw-bf16      2 + 2 + 4  (m, v in bf16)        = 8   pure-bf16 AdamW
#   adam-8bit       2 + 4 + 6  (master 4 + m, v 1+1) = 12  bitsandbytes 8-bit Adam
#   sgd             2 + 4 + 8  (master 4 + momentum) = 14  SGD with momentum
#   adamw-deepseek  2 + 4 + 8  (master 4, m, v bf16) = 14  DeepSeek-V3's FP8 recipe (arXiv
#                   2412.19437 §3.3.2: "BF16 ... to track the first and second moments",
#                   master weights and accumulated gradients "still retained in FP32"; the
#                   FP8 GEMM operands are transient casts of the BF16 weights)
# 8-bit Adam and SGD keep fp32 gradients as Hugging Face's accounting does ("gradients are
# always kept in fp32", huggingface/transformers docs/source/en/model_memory_anatomy.md
# @249ef81: 8-bit AdamW 2 bytes of states, SGD with momentum 4, plus the fp32 master).
_MIXED_STATES = {
    "adamw": (2.0, 12.0), "adamw-fp32grad": (4.0, 12.0), "adamw-bf16": (2.0, 4.0),
    "adam-8bit": (4.0, 6.0), "sgd": (4.0, 8.0), "adamw-deepseek": (4.0, 8.0),
}
# Pure fp32 training: no separate master copy.
_FP32_STATES = {
    "adamw": (4.0, 8.0), "adamw-fp32grad": (4.0, 8.0), "adamw-bf16": (4.0, 4.0),
    "adam-8bit": (4.0, 2.0), "sgd": (4.0, 4.0), "adamw-deepseek": (4.0, 4.0),
}
# LoRA adapter parameters: (weight, gradient, optimizer) bytes by adapter precision.
# bf16 is what the QLoRA reference training uses (artidoro/qlora `--bf16`: adapters in bf16,
# paged AdamW with 32-bit states, no separate master copy): 2 + 2 + 8 = 12 bytes with AdamW.
# fp32 is PEFT's default autocast_adapter_dtype: 4 + 4 + 8 = 16 bytes (docs/sizing.md §1.8
# "~16 B per trainable param").
ADAPTER_PRECISIONS = ("bf16", "fp32")
_ADAPTER_STATES = {
    "fp32": {
        "adamw": (4.0, 4.0, 8.0), "adamw-fp32grad": (4.0, 4.0, 8.0),
        "adamw-bf16": (2.0, 2.0, 4.0), "adam-8bit": (4.0, 4.0, 2.0), "sgd": (4.0, 4.0, 4.0),
        "adamw-deepseek": (4.0, 4.0, 4.0),
    },
    "bf16": {
        "adamw": (2.0, 2.0, 8.0), "adamw-fp32grad": (2.0, 4.0, 8.0),
        "adamw-bf16": (2.0, 2.0, 4.0), "adam-8bit": (2.0, 2.0, 2.0), "sgd": (2.0, 2.0, 4.0),
        "adamw-deepseek": (2.0, 4.0, 8.0),
    },
}

# Per-GPU memory outside the model: CUDA context, cuBLAS workspaces, NCCL buffers and allocator
# slack for training; for serving, the non-torch increase vLLM measures (its budget is taken
# after the CUDA context exists). docs/sizing.md §1.7 recommends "~1-2 GiB non-torch".
TRAIN_OVERHEAD_BYTES = 1.0 * GiB
INFERENCE_OVERHEAD_BYTES = 0.5 * GiB
# vLLM profiles the activation peak with one batch of max_num_batched_tokens (8192 by default
# for chunked prefill in the v1 engine); a smaller job only needs its own tokens.
PREFILL_CHUNK_TOKENS = 8192


def weight_bits(precision: str, group_size: int = 128) -> float:
    """Bits per quantised weight; int4 includes its fp16 group scale, fp4 (NVFP4) and mxfp4
    their block scales (4.5 and 4.25)."""
    if precision == "int4":
        return 4.0 + 16.0 / group_size
    return WEIGHT_BITS[precision]


def compute_peak(precision: str, gpu_id: str, bf16_flops: float, fp8_flops: float | None,
                 fp4_flops: float | None, fp4_formats: frozenset[str] = FP4_PRECISIONS, *,
                 int8_ops: float | None = None) -> tuple[float, str | None]:
    """The dense peak (FLOP/s) a GEMM at this weight precision runs at, and a warning when the
    GPU lacks the tensor cores for it.

    fp8 runs at the FP8 peak with FP8 tensor cores (Hopper, Ada, Blackwell, CDNA3); fp4 and
    mxfp4 at the FP4 peak with FP4 tensor cores for that block format (`fp4_formats`: Blackwell
    runs both, CDNA4 only the OCP MX formats), W4A4. Elsewhere the
    quantised weights are dequantised into BF16 GEMMs (weight-only: W8A16/W4A16), which saves
    memory and bandwidth but not compute. fp32 runs at TF32, half the BF16 peak. Where the
    INT8 tensor cores are slower than BF16 (`int8_ops`: Blackwell Ultra's ~125-160 TOPS
    against 2,250+ BF16), the int8 warning says so: W8A8 INT8 kernels would run at that peak.
    """
    if precision == "fp8" and fp8_flops:
        return fp8_flops, None
    if precision in FP4_PRECISIONS and fp4_flops and precision in fp4_formats:
        return fp4_flops, None
    if precision in FP4_PRECISIONS:
        if not fp4_flops:
            lacks = "no FP4 tensor cores"
        else:  # FP4 tensor cores for another block format: name it, it is the fast choice
            formats = sorted(fp4_formats & FP4_PRECISIONS)
            lacks = (f"no {precision} tensor-core path (its FP4 tensor cores take "
                     f"{' and '.join(formats)}: --precision {formats[0]})") if formats \
                else f"no {precision} tensor-core path"
        return bf16_flops, (f"{precision} weights run weight-only on {gpu_id} (W4A16): it has "
                            f"{lacks}, so they save memory and bandwidth, not compute")
    if precision in ("fp8", "int8", "int4", "nf4"):
        slow = ""
        if precision == "int8" and int8_ops and int8_ops < bf16_flops:
            slow = (f"; its INT8 tensor cores peak at {int8_ops / 1e12:,.0f} TOPS, below its "
                    f"{bf16_flops / 1e12:,.0f} BF16 TFLOPS, so INT8 (W8A8) kernels would run "
                    "slower still: prefer fp8 or fp4 weights")
        return bf16_flops, (f"{precision} weights run weight-only on {gpu_id} (W8A16/W4A16): "
                            "they save memory and bandwidth, not compute" + slow)
    if precision == "fp32":
        return bf16_flops * 0.5, None
    return bf16_flops, None


def weights_bytes(model: ModelSpec, precision: str, *, group_size: int = 128,
                  nf4: bool = False) -> float:
    """Weight memory: decoder matrices at `precision`, the rest (embeddings, norms) in bf16.

    fp32/bf16/fp16 store every parameter at that width. For Llama-3.1-70B: bf16 141.1 GB,
    int4 group-128 with bf16 embeddings ≈ 39.5 GB (docs/sizing.md §5; docs/claims.md B3).
    The matrices a checkpoint at `precision` keeps in 16 bits are counted at 2 bytes
    (DeepSeek-R1 in NVFP4: 396.7 GB, 16.4 GB more than with attention in FP4).
    """
    if precision == "native":
        if model.quant_method:  # the shipped share at its bits (scales included), the rest bf16
            return model.quant_params * model.quant_bits / 8.0 + \
                (model.params - model.quant_params) * 2.0
        precision = model.native_precision
    if nf4:
        bits = NF4_BITS
    elif precision in ("fp32", "bf16", "fp16"):
        return model.params * WEIGHT_BITS[precision] / 8.0
    else:
        bits = weight_bits(precision, group_size)
    # A checkpoint at this precision may keep some decoder matrices in 16 bits
    # (`ModelSpec.sixteen_bit_params`: DeepSeek's NVFP4 exports keep MLA attention in BF16).
    kept = model.sixteen_bit_params(precision)
    return model.linear_params * bits / 8.0 + (model.params - model.linear_params) * 2.0 + \
        kept * (2.0 - bits / 8.0)


def kv_bytes_per_token(model: ModelSpec, kv_bytes: float) -> float:
    """2 (K and V) × layers × kv_heads × head_dim × bytes (docs/sizing.md §1.6); MLA caches
    (kv_lora_rank + qk_rope_head_dim) × layers × bytes.

    Llama-3.1-8B bf16: 131,072; Llama-3.1-70B: 327,680; Llama-2-7B (MHA): 524,288;
    DeepSeek-V3: 61 × 576 × 2 = 70,272.
    """
    return model.layers * model.kv_elements_per_token_layer * kv_bytes


def kv_cache_bytes(model: ModelSpec, kv_bytes: float, context: float,
                   concurrency: float) -> float:
    """KV for `concurrency` requests of `context` tokens; sliding-window layers stop at the
    window."""
    per_layer_token = model.kv_elements_per_token_layer * kv_bytes
    full_layers = model.layers - model.sliding_layers
    tokens = full_layers * context
    if model.sliding_layers:
        tokens += model.sliding_layers * min(context, model.sliding_window or context)
    return per_layer_token * tokens * concurrency


# DeepSeek-V3's FP8 activation cache (arXiv 2412.19437 §3.3.2-§3.3.3): E4M3 values with one
# FP32 scale per 1×128 tile, and the customised E5M6 (12 bits, same tiles) for the inputs of
# the Linear after attention, which attention's backward also reads.
FP8_CACHED_BYTES = 1.0 + 4.0 / 128.0
E5M6_CACHED_BYTES = 1.5 + 4.0 / 128.0


def activation_bytes_per_token_layer(model: ModelSpec, seq_len: float, attention: str,
                                     recompute: str, fp8_cache: bool = False) -> float:
    """Bytes one token keeps for backward in one layer, 16-bit activations, no dropout.

    Korthikanti et al. (arXiv 2205.05198) Table 2 gives 34·sbh + 5·a·s²·b for a GPT layer with
    an ungated 4h MLP and dropout. The same bookkeeping for GQA and a gated MLP, without dropout
    masks: norm inputs 2h, QKV input h, Q a·d, K/V 2·kv·d, attention output a·d, MLP input h,
    and the MLP intermediates (SwiGLU: the gate and up projections and the product fed to the
    down projection, 3·I, as Megatron's fused bias-SwiGLU keeps them and recomputes the
    activation in backward; GELU: 2·I), all × 2 bytes. For MoE a token keeps the
    intermediates of its top-k experts. Eager attention adds the score term 5·a·s
    (Korthikanti) unless selective recompute drops it; FlashAttention never stores it
    (llm-analysis).

    Selective recompute (Korthikanti §4: recompute what costs memory but few FLOPs) drops,
    besides the attention core, the element-wise outputs a layer can rebuild from what it
    keeps: the two normed copies of the residual stream (h each) and the MLP activation
    (SwiGLU: the product, I; GELU: its output, I), as Megatron-Core's selective
    `recompute_modules` "core_attn", "layernorm" and the activation do with output-discarding
    checkpoints (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py@d2c5e8b).
    It keeps the residual inputs (2h), Q, K, V and the attention output, and the MLP's matmul
    outputs: with FlashAttention, where the core keeps nothing to drop, this is what makes
    selective smaller than none. Its extra forward work is element-wise, not counted in FLOPs.
    """
    h = model.hidden
    qd = model.heads * model.head_dim
    kvd = model.kv_heads * model.head_dim
    inter = model.mlp_intermediate_per_token
    mlp = (3.0 if model.gated_mlp else 2.0) * inter
    if fp8_cache:
        per_token = _fp8_cached_bytes(h, qd, kvd, mlp - inter, recompute)
        if attention == "eager" and recompute == "none":
            per_token += 5.0 * model.heads * seq_len
        return per_token
    if recompute == "selective":
        elements = 2.0 * h + 2.0 * qd + 2.0 * kvd + mlp - inter
    else:
        elements = 4.0 * h + 2.0 * qd + 2.0 * kvd + mlp
    per_token = 2.0 * elements
    if attention == "eager" and recompute == "none":
        per_token += 5.0 * model.heads * seq_len
    return per_token


def fp8_activation_cache(workload: str, precision: str) -> bool:
    """Whether training caches its activations as DeepSeek-V3's FP8 recipe does: full
    training (pretrain, full fine-tuning) at fp8. Adapters train on a frozen base whose inputs
    the 16-bit adapters need, so LoRA keeps 16-bit activations."""
    return precision == "fp8" and workload in TRAINING_WORKLOADS - ADAPTER_WORKLOADS


def _fp8_cached_bytes(h: float, qd: float, kvd: float, mlp_inputs: float,
                      recompute: str) -> float:
    """`activation_bytes_per_token_layer` under DeepSeek-V3's FP8 recipe (arXiv 2412.19437
    §3.3.3, "Low-Precision Activation"): the inputs of the Linear layers are cached in FP8 for
    their backward (the QKV and MLP inputs, h each), the input of the Linear after attention in
    E5M6 (a·d), and the inputs of the SwiGLU (gate and up outputs, 2·I; GELU: I) in FP8, its
    output recomputed in backward instead of kept. What the recipe keeps in its original
    precision stays 16-bit: the normalisation inputs (2h) and attention's own inputs Q, K, V
    (attention and the norms run in BF16/FP32, §3.3.1). Selective recompute drops the two
    normed copies as it does in 16 bits; the activation output is recomputed either way."""
    elements_16 = 2.0 * h + qd + 2.0 * kvd
    per_token = 2.0 * elements_16 + E5M6_CACHED_BYTES * qd + FP8_CACHED_BYTES * mlp_inputs
    if recompute != "selective":
        per_token += FP8_CACHED_BYTES * 2.0 * h
    return per_token


def training_output_bytes_per_token(model: ModelSpec, cross_entropy: str = "full") -> float:
    """Output layer and cross-entropy: 4·s·b·h·(1 + V/h) bytes (Megatron's
    compute_activation_memory), the logits kept in fp32 for the loss; the default, as Megatron
    and the Hugging Face Trainer compute the loss.

    `chunked` (torchtune's CEWithChunkedOutputLoss, its recipes' loss): the output projection
    runs per chunk of tokens and only one chunk at a time is upcast to fp32, so the 16-bit
    logits (2·V) stay and the fp32 copy is one chunk's (4·V / 8): 4·h + 2·V + V/2 bytes."""
    if cross_entropy == "chunked":
        return 4.0 * model.hidden + 2.0 * model.vocab + 4.0 * model.vocab / CE_CHUNKS
    return 4.0 * (model.hidden + model.vocab)


def inference_activation_peak(model: ModelSpec, *, context: float, concurrency: float) -> float:
    """Peak transient bytes of one forward step (the largest single layer's buffers).

    Over a chunk of T = min(8192, context × concurrency) tokens: the residual stream and its
    normed copy (2h) plus the larger of the attention buffers (Q, K, V and output) and the MLP
    buffers (gate+up and the activation: 3·I), in 16 bits; plus fp32 logits for one sampled
    position per request. llm-analysis keeps "only the max of one layer's buffers" likewise.
    """
    tokens = min(float(PREFILL_CHUNK_TOKENS), context * concurrency)
    qd = model.heads * model.head_dim
    kvd = model.kv_heads * model.head_dim
    inter = model.mlp_intermediate_per_token
    elements = 2.0 * model.hidden + max(2.0 * qd + 2.0 * kvd, 3.0 * inter)
    return 2.0 * elements * tokens + 4.0 * model.vocab * concurrency


def state_bytes(precision: str, optimizer: str) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per trainable parameter for full training."""
    if precision == "fp32":
        grads, opt = _FP32_STATES[optimizer]
        return 4.0, grads, opt
    if precision in QUANTISED_PRECISIONS:
        raise InvalidInput(f"{precision} weights cannot be trained directly; use --workload "
                           "lora or qlora (frozen quantised base + trainable adapters)")
    grads, opt = _MIXED_STATES[optimizer]
    return 2.0, grads, opt


def adapter_state_bytes(optimizer: str, precision: str = "bf16") -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per LoRA adapter parameter."""
    return _ADAPTER_STATES[precision][optimizer]


# DeepSpeed's own estimators, reproduced exactly (for comparison with its printed tables) -------


def deepspeed_zero2_estimate(total_params: float, *, num_gpus_per_node: int = 1,
                             num_nodes: int = 1, cpu_offload: bool = True,
                             additional_buffer_factor: float = 1.5) -> tuple[float, float]:
    """(gpu_bytes, cpu_bytes) of `estimate_zero2_model_states_mem_needs`.

    Current code, microsoft/DeepSpeed:deepspeed/runtime/zero/stage_1_and_2.py@38327e0 (after
    PR #5099, June 2024): no offload gpu = 2P + int(18P/N). DeepSpeed prints these / 2**30.
    """
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu = 2 * total_params
        cpu = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu = 2 * total_params + int(18 * total_params / total_gpus)
        cpu = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return float(gpu), float(cpu)


def deepspeed_zero3_estimate(total_params: float, largest_layer_params: float, *,
                             num_gpus_per_node: int = 1, num_nodes: int = 1,
                             cpu_offload: bool = True, cpu_offload_params: bool = True,
                             zero_init: bool = True,
                             additional_buffer_factor: float = 1.5) -> tuple[float, float]:
    """(gpu_bytes, cpu_bytes) of `estimate_zero3_model_states_mem_needs` (stage3.py@38327e0)."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    p, gpn, buf = total_params, num_gpus_per_node, additional_buffer_factor
    if cpu_offload:
        if cpu_offload_params:
            gpu = largest_layer_memory
            cpu = (p * 18 * gpus_factor * buf if zero_init
                   else p * max(4 * gpn, 18 * gpus_factor) * buf)
        else:
            gpu = largest_layer_memory + int(2 * p / total_gpus)
            cpu = (p * 16 * gpus_factor * buf if zero_init
                   else p * max(4 * gpn, 16 * gpus_factor) * buf)
    else:
        gpu = largest_layer_memory + int(18 * p / total_gpus)
        cpu = largest_layer_params * 4 * gpn * buf if zero_init else p * 4 * gpn * buf
    return float(gpu), float(cpu)


def zero_model_states_per_gpu(params: float, n: int, stage: int, k: float = 12.0) -> float:
    """ZeRO paper per-GPU model states (arXiv 1910.02054 §5): Ψ params, K optimizer bytes.

    stage 0 (DDP) (2+2+K)Ψ; 1: 4Ψ + KΨ/N; 2: 2Ψ + (2+K)Ψ/N; 3: (2+2+K)Ψ/N.
    """
    if stage == 0:
        return (4.0 + k) * params
    if stage == 1:
        return 4.0 * params + k * params / n
    if stage == 2:
        return 2.0 * params + (2.0 + k) * params / n
    if stage == 3:
        return (4.0 + k) * params / n
    raise InvalidInput(f"unknown ZeRO stage {stage}")
