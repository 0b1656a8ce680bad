"""Model resolution, startup checks and deterministic KV-cache sizing (simulator only).

Every check raises StartupError carrying the exception lines vLLM would print,
so the entrypoint can log them and exit 1 like a failed engine start.
"""
import json
import math
import os

SSM_MODEL_TYPES = {"mamba", "mamba2", "falcon_mamba", "falcon_h1", "nemotron_h", "jamba", "bamba",
                   "zamba2", "granitemoehybrid", "plamo2", "qwen3_next", "lfm2"}
SSM_CONV_KEYS = ("conv_kernel", "mamba_d_conv", "linear_conv_kernel_dim", "conv_L_cache")
NATIVE_ARCHITECTURES = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                        "MambaForCausalLM", "Mamba2ForCausalLM", "FalconH1ForCausalLM",
                        "NemotronHForCausalLM", "JambaForCausalLM", "GPTNeoXForCausalLM"}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1,
                  "bfloat16": 2}
GIB = 1 << 30
NON_KV_OVERHEAD = GIB // 4  # CUDA context, activation peak and graph pool, per rank
VLLM_CONFIG_HINT = ("Failed to load the model config. If the model is a custom model not yet available "
                    "in the HuggingFace transformers library, consider setting `trust_remote_code=True` "
                    "in LLM or using the `--trust-remote-code` flag in the CLI.")


class StartupError(Exception):
    """A failed start: ``lines`` are printed to stderr, ``prefix`` names the process."""

    def __init__(self, *lines, prefix="APIServer"):
        super().__init__(lines[-1])
        self.lines = list(lines)
        self.prefix = prefix


def is_conv_ssm(config):
    """Narwhal's rule for models whose transfer state includes a convolutional SSM state."""
    if str(config.get("model_type", "")).lower() in SSM_MODEL_TYPES:
        return True
    return any(config.get(key) is not None for key in SSM_CONV_KEYS)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def _config_file(path):
    return path if os.path.isfile(path) else os.path.join(path, "config.json")


def auto_map_sources(model_config_path, directories):
    """Files among the model config and tokenizer metadata that declare an auto_map."""
    found = []
    candidates = [model_config_path] + [os.path.join(d, n) for d in directories
                                        for n in ("config.json", "tokenizer_config.json")]
    for path in dict.fromkeys(candidates):
        data = _read_json(path) if os.path.isfile(path) else None
        if isinstance(data, dict) and data.get("auto_map"):
            found.append(path)
    return found


def parse_len(text):
    """vLLM accepts human-readable lengths for --max-model-len (``32k``, ``1M``)."""
    text = str(text).strip()
    scale = {"k": 1000, "K": 1024, "m": 1000 ** 2, "M": 1024 ** 2}.get(text[-1:], 1)
    return int(float(text[:-1] if scale != 1 else text) * scale)


def resolve(args, environ):
    """Load the model config and run vLLM's early startup checks. Returns a dict of facts."""
    import transformers

    model = args.model
    gguf = os.path.isfile(model)
    if gguf:
        _check_gguf(args)
        config_source = _config_file(args.hf_config_path)
    else:
        if not os.path.isdir(model):
            raise StartupError("OSError: " + str(transformers._not_found(model)))
        config_source = _config_file(args.hf_config_path or model)
    tokenizer = args.tokenizer or (os.path.dirname(model) if gguf else model)
    dirs = [d for d in (os.path.dirname(config_source), None if gguf else model, tokenizer) if d]
    custom = auto_map_sources(config_source, dirs)
    if custom and not args.trust_remote_code:
        raise StartupError(f"ValueError: {transformers._remote_code_error(model)}", "",
                           "The above exception was the direct cause of the following exception:", "",
                           f"RuntimeError: {VLLM_CONFIG_HINT}")
    try:
        config = transformers.AutoConfig.from_pretrained(config_source, trust_remote_code=args.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise StartupError(f"{type(exc).__name__}: {exc}") from None
    config = config.to_dict()
    arch = (config.get("architectures") or ["?"])[0]
    if arch not in NATIVE_ARCHITECTURES and not args.trust_remote_code:
        raise StartupError(f"ValueError: Model architectures ['{arch}'] are not supported for now. "
                           "Consider passing --trust-remote-code for custom model code.")
    facts = {"config": config, "config_source": config_source, "tokenizer": tokenizer,
             "gguf": gguf, "architecture": arch, "custom_code": custom, "ssm": is_conv_ssm(config),
             "tp": args.tensor_parallel_size}
    facts.update(_dims(config, args))
    _check_parallel(facts, args, environ)
    return facts


def _check_gguf(args):
    try:
        import vllm_gguf_plugin
    except ImportError:
        raise StartupError(f"ValueError: {args.model} is a GGUF file but the vllm-gguf-plugin package is "
                           "not installed in this runtime.") from None
    vllm_gguf_plugin.register()
    if not vllm_gguf_plugin.is_gguf(args.model):
        raise StartupError(f"ValueError: {args.model} is not a GGUF file (bad magic).")
    if not args.hf_config_path or not args.tokenizer:
        raise StartupError("ValueError: GGUF checkpoints need the base model's configuration and tokenizer: "
                           "pass --hf-config-path and --tokenizer.")


def _dims(config, args):
    heads = config.get("num_attention_heads") or config.get("num_heads") or 1
    hidden = config.get("hidden_size") or 256
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or max(1, hidden // heads)
    layers = config.get("num_hidden_layers") or 1
    dtype = args.dtype if args.dtype != "auto" else str(config.get("torch_dtype") or "bfloat16")
    if dtype in ("float32", "float") and args.dtype == "auto":
        dtype = "bfloat16"  # vLLM downcasts float32 checkpoints when dtype=auto
    if dtype not in DTYPE_BYTES:
        raise StartupError(f"ValueError: Unknown dtype: {dtype!r}")
    derived = config.get("max_position_embeddings") or 2048
    max_len = parse_len(args.max_model_len) if args.max_model_len is not None else derived
    if max_len > derived and os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
        raise StartupError(f"ValueError: User-specified max_model_len ({max_len}) is greater than the derived "
                           f"max_model_len (max_position_embeddings={derived} or model_max_length=None in "
                           "model's config.json). To allow overriding this maximum, set the env var "
                           "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")
    cache_dtype = args.kv_cache_dtype
    kv_bytes = DTYPE_BYTES[dtype] if cache_dtype == "auto" else KV_DTYPE_BYTES[cache_dtype]
    vocab = config.get("vocab_size") or 32000
    inter = config.get("intermediate_size") or 4 * hidden
    params = 2 * vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * inter)
    return {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "layers": layers, "dtype": dtype,
            "cache_dtype": cache_dtype, "kv_bytes": kv_bytes, "max_model_len": max_len,
            "weight_bytes": params * DTYPE_BYTES[dtype], "block_size": args.block_size or 16}


def _check_parallel(facts, args, environ):
    tp = args.tensor_parallel_size
    if tp < 1:
        raise StartupError(f"ValueError: tensor_parallel_size must be positive, got {tp}.")
    if facts["heads"] % tp:
        raise StartupError(f"ValueError: Total number of attention heads ({facts['heads']}) must be "
                           f"divisible by tensor parallel size ({tp}).")
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if var in environ:
            devices = [d for d in environ[var].split(",") if d.strip()]
            if not devices:
                raise StartupError("RuntimeError: No CUDA GPUs are available", prefix="EngineCore_DP0")
            if len(devices) < tp:
                raise StartupError(f"AssertionError: world_size ({tp}) must be less than or equal to the "
                                   f"number of visible devices ({len(devices)}).", prefix="EngineCore_DP0")


def check_ssm_layout(facts, environ):
    """The NIXL worker's assertion for convolutional SSM state (enforced for every SSM start here)."""
    if not facts["ssm"]:
        return None
    from vllm import envs
    try:
        layout = envs.VLLM_SSM_CONV_STATE_LAYOUT if "VLLM_SSM_CONV_STATE_LAYOUT" in envs.environment_variables else None
    except ValueError as exc:
        raise StartupError(f"ValueError: {exc}") from None
    if (layout or "SD") != "DS":
        raise StartupError("AssertionError: 3-read Mamba conv transfer requires DS conv state layout. "
                           "Set VLLM_SSM_CONV_STATE_LAYOUT=DS", prefix="Worker_TP0" if facts.get("tp", 1) > 1
                           else "EngineCore_DP0")
    return layout


def kv_layout(facts, args, environ):
    """Deterministic stand-in for vLLM's memory profiling: equal inputs give equal layouts."""
    tp = args.tensor_parallel_size
    total = float(environ.get("NARWHAL_SIM_GPU_MEMORY_GIB", "2")) * GIB
    requested = math.ceil(total * args.gpu_memory_utilization)
    available = requested - facts["weight_bytes"] // tp - NON_KV_OVERHEAD
    kv_heads_rank = max(1, facts["kv_heads"] // tp)
    block = facts["block_size"]
    page = 2 * block * kv_heads_rank * facts["head_dim"] * facts["kv_bytes"]
    num_blocks = max(0, available) // (page * facts["layers"])
    if num_blocks <= 0:
        raise StartupError("ValueError: No available memory for the cache blocks. Try increasing "
                           "`gpu_memory_utilization` when initializing the engine.", prefix="EngineCore_DP0")
    tokens = num_blocks * block
    per_request = math.ceil(facts["max_model_len"] / block)
    if num_blocks < per_request:
        need = per_request * page * facts["layers"] / GIB
        raise StartupError(
            f"ValueError: To serve at least one request with the models's max seq len "
            f"({facts['max_model_len']}), ({need:.2f} GiB KV cache is needed, which is larger than the "
            f"available KV cache memory ({available / GIB:.2f} GiB). Based on the available memory, the "
            f"estimated maximum model length is {tokens}. Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len` when initializing the engine.", prefix="EngineCore_DP0")
    return {"num_gpu_blocks": num_blocks, "gpu_kv_cache_tokens": tokens, "block_size": block,
            "page_size_bytes": page, "available_bytes": available, "requested_bytes": requested,
            "max_concurrency": num_blocks / per_request, "kv_heads_per_rank": kv_heads_rank}
