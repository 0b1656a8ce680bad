#!/usr/bin/env python3
"""Runtime inspections for one checked plan (narwhal engine model-dimensions,
handshake-policy, cache-registration's block grouping and start-shared's CUDA devices).

Runs inside the engine's own runtime exactly as check_runtime.py does (host
Python with the engine's environment for native engines, ``python3`` in a
temporary container for images), stdlib plus the runtime's own packages:

    python3 inspect_runtime.py INPUT.json

INPUT: mode ("model-dimensions" | "handshake-policy" | "block-grouping" | "cuda-devices"),
plan_sha256, model_dir, hf_config_path, trust_remote_code, dtype, kv_cache_dtype,
block_size, tensor_parallel_size, kv_transfer_config, environment, model_rules
(narwhal's MODEL_RULES, applied through check_runtime.py's is_conv_ssm), visibility_env.

cuda-devices lists the devices the runtime's CUDA driver enumerates, as (ordinal, uuid),
twice: every device (the visibility variable removed, the rest of the environment kept, so
CUDA_DEVICE_ORDER applies) and the ones the recorded environment makes visible. The driver
is reached through cuda-python (cuda.bindings.driver) or libcuda.so.1 via ctypes: no torch,
no CUDA context, so the query allocates no device memory before the baseline reading.

The model is read through the runtime's transformers.AutoConfig; the connector
through vLLM's KVConnectorFactory and the installed NIXL. The last stdout line
is ``NARWHAL_INSPECT_RESULT {json}``. Exit 0 ok, 1 an inspection failed, 2 bad input.
"""
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import types

RESULT_PREFIX = "NARWHAL_INSPECT_RESULT "
MODES = ("model-dimensions", "handshake-policy", "block-grouping", "cuda-devices")
LIST_DEVICES = "--list-cuda-devices"
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1, "bfloat16": 2, "float16": 2}
NIXL_DISTRIBUTIONS = ("nixl", "nixl-rocm")


class InspectionFailed(Exception):
    def __init__(self, check, message, fix):
        super().__init__(message)
        self.check, self.message, self.fix = check, message, fix


def say(line):
    print(line, flush=True)


def is_conv_ssm(config, rules):
    """check_runtime.py's is_conv_ssm (this script ships alone into the runtime), on the same passed lists."""
    if str(config.get("model_type") or "").lower() in rules["conv_ssm_model_types"]:
        return True
    return any(config.get(key) is not None for key in rules["conv_ssm_config_keys"])


def model_config(plan):
    """The model configuration as the runtime's transformers reads it (text config for multimodal models)."""
    source = plan.get("hf_config_path") or plan["model_dir"]
    try:
        from transformers import AutoConfig
        config = AutoConfig.from_pretrained(source, trust_remote_code=plan["trust_remote_code"])
    except Exception as exc:  # noqa: BLE001 - a config the runtime cannot read is the finding
        raise InspectionFailed("model", f"AutoConfig cannot read {source}: {type(exc).__name__}: {exc}",
                               "Mount the model snapshot (or pass --hf-config-path for a GGUF file) and match "
                               "--trust-remote-code to its auto_map.") from None
    text = getattr(config, "get_text_config", None)
    data = (text() if callable(text) else config).to_dict()
    say(f"ok   model config {source}: {data.get('model_type')}")
    return data, source


def dimensions(plan):
    config, source = model_config(plan)
    heads = config.get("num_attention_heads") or config.get("n_head") or 1
    hidden = config.get("hidden_size") or config.get("n_embd") or 0
    kv_heads = config.get("num_key_value_heads") or heads
    head_size = config.get("head_dim") or (hidden // heads if hidden else 0)
    layers = config.get("num_hidden_layers") or config.get("n_layer") or 0
    tp = plan["tensor_parallel_size"]
    if heads % tp:
        raise InspectionFailed("parallelism", f"{heads} attention heads are not divisible by tensor_parallel_size {tp}",
                               "Select a GPU count (gpu_ids) that divides the model's attention heads.")
    dtype = plan["dtype"]
    cache = plan["kv_cache_dtype"]
    cache_dtype = dtype if cache == "auto" else cache
    kv_bytes = KV_DTYPE_BYTES.get(cache_dtype, DTYPE_BYTES.get(cache_dtype))
    if kv_bytes is None:
        raise InspectionFailed("kv_cache_dtype", f"unknown cache dtype {cache_dtype}", "Set runtime.kv_cache_dtype to auto or a vLLM cache dtype.")
    kv_heads_per_rank = max(1, kv_heads // tp)
    block = plan["block_size"]
    ssm = is_conv_ssm(config, plan["model_rules"])
    return {
        "config_source": source, "architecture": (config.get("architectures") or [None])[0],
        "model_type": config.get("model_type"), "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_kv_heads": kv_heads, "head_size": head_size, "hidden_size": hidden,
        "vocab_size": config.get("vocab_size"), "max_position_embeddings": config.get("max_position_embeddings"),
        "config_dtype": config.get("torch_dtype") or config.get("dtype"), "dtype": dtype, "kv_cache_dtype": cache,
        "cache_dtype": cache_dtype, "kv_bytes_per_element": kv_bytes, "tensor_parallel_size": tp,
        "kv_heads_per_rank": kv_heads_per_rank, "block_size": block,
        # K and V of one block of one layer on one rank, as the KV cache allocates and NIXL registers it.
        "page_size_bytes": 2 * block * kv_heads_per_rank * head_size * kv_bytes,
        "sliding_window": config.get("sliding_window"), "layer_types": config.get("layer_types"),
        "conv_ssm": ssm,
    }


def block_grouping(plan):
    dims = dimensions(plan)
    layers = dims["num_hidden_layers"]
    kinds = dims["layer_types"] if isinstance(dims["layer_types"], list) and len(dims["layer_types"]) == layers else None
    if kinds is None:
        kind = "mamba" if dims["conv_ssm"] else ("sliding_window" if dims["sliding_window"] else "full_attention")
        kinds = [kind] * layers
    groups = {}
    for index, kind in enumerate(kinds):
        groups.setdefault(str(kind), []).append(index)
    say(f"ok   {len(groups)} KV cache group(s): {', '.join(groups)}")
    return {"dimensions": dims, "groups": [{"kind": k, "layers": v, "block_size": dims["block_size"]}
                                           for k, v in groups.items()]}


def handshake(plan):
    dims = dimensions(plan)
    from vllm.version import __version__ as vllm_version
    config = plan["kv_transfer_config"]
    try:
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        cls = KVConnectorFactory.get_connector_class(types.SimpleNamespace(**{"kv_connector_module_path": None, **config}))
    except Exception as exc:  # noqa: BLE001
        raise InspectionFailed("connector", f"KVConnectorFactory cannot resolve {config.get('kv_connector')}: "
                               f"{type(exc).__name__}: {exc}", "Use a runtime whose vLLM registers NixlConnector.") from None
    module = sys.modules.get(cls.__module__)
    say(f"ok   connector {cls.__module__}.{cls.__qualname__}")
    try:
        nixl_api = importlib.import_module("nixl._api")
    except Exception as exc:  # noqa: BLE001
        raise InspectionFailed("nixl", f"the NIXL worker does not import: {type(exc).__name__}: {exc}",
                               "Install the NIXL build that matches the runtime (nixl or nixl-rocm).") from None
    dist, version = None, None
    for name in NIXL_DISTRIBUTIONS:
        try:
            dist, version = name, importlib.metadata.version(name)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    wanted = list((config.get("kv_connector_extra_config") or {}).get("backends") or ["UCX"])
    agent = nixl_api.nixl_agent("narwhal-handshake-policy", nixl_api.nixl_agent_config(backends=wanted))
    plugins = list(agent.get_plugin_list())
    missing = [b for b in wanted if b not in plugins]
    if missing:
        raise InspectionFailed("nixl", f"the installed NIXL lacks backend(s) {missing}; it offers {plugins}",
                               "Install NIXL with the configured backends, or correct kv_connector_extra_config.backends.")
    say(f"ok   NIXL {dist} {version}: backends {wanted} available")
    env = plan["environment"]
    return {
        "vllm_version": str(vllm_version),
        "connector": {"name": config.get("kv_connector"), "class": f"{cls.__module__}.{cls.__qualname__}",
                      "version": getattr(module, "NIXL_CONNECTOR_VERSION", None), "kv_role": config.get("kv_role"),
                      "kv_load_failure_policy": config.get("kv_load_failure_policy"), "backends": wanted},
        "nixl": {"distribution": dist, "version": version, "plugins": plugins},
        "attention_backend": env.get("VLLM_ATTENTION_BACKEND") or os.environ.get("VLLM_ATTENTION_BACKEND") or "auto",
        "dimensions": dims,
    }


def format_uuid(raw):
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def driver_devices():
    """(ordinal, uuid, pci_bus_id) of every device this process's CUDA driver enumerates, and the binding used."""
    try:
        from cuda.bindings import driver
    except ImportError:
        driver = None
    if driver is not None:
        def call(result, what):
            if int(result[0]) != 0:
                raise RuntimeError(f"{what} returned CUresult {int(result[0])}")
            return result[1] if len(result) > 1 else None
        call(driver.cuInit(0), "cuInit")
        devices = []
        for ordinal in range(call(driver.cuDeviceGetCount(), "cuDeviceGetCount")):
            dev = call(driver.cuDeviceGet(ordinal), "cuDeviceGet")
            uuid = format_uuid(call(driver.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)
            bus = call(driver.cuDeviceGetPCIBusId(32, dev), "cuDeviceGetPCIBusId")
            devices.append({"ordinal": ordinal, "uuid": uuid, "pci_bus_id": bytes(bus).rstrip(b"\0").decode()})
        return "cuda.bindings.driver", devices
    import ctypes  # only here: the cuda-python path, and every other inspection, need no libffi
    lib = ctypes.CDLL("libcuda.so.1")
    def check(code, what):
        if code != 0:
            raise RuntimeError(f"{what} returned CUresult {code}")
    check(lib.cuInit(0), "cuInit")
    count = ctypes.c_int()
    check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    devices = []
    for ordinal in range(count.value):
        dev = ctypes.c_int()
        check(lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        raw = (ctypes.c_ubyte * 16)()
        check(lib.cuDeviceGetUuid(raw, dev), "cuDeviceGetUuid")
        bus = ctypes.create_string_buffer(32)
        check(lib.cuDeviceGetPCIBusId(bus, 32, dev), "cuDeviceGetPCIBusId")
        devices.append({"ordinal": ordinal, "uuid": format_uuid(raw), "pci_bus_id": bus.value.decode()})
    return "libcuda.so.1", devices


def cuda_devices(plan):
    """Every device in the runtime's order, and the ones the recorded environment selects (see the docstring)."""
    var = plan.get("visibility_env") or "CUDA_VISIBLE_DEVICES"
    try:
        binding, visible = driver_devices()
    except (ImportError, OSError, RuntimeError) as exc:
        raise InspectionFailed("cuda", f"the runtime's CUDA driver does not enumerate devices: {exc}",
                               "Run the engine's runtime where the NVIDIA driver is installed and its GPUs are "
                               "visible (for a container: the NVIDIA container runtime).") from None
    env = {k: v for k, v in os.environ.items() if k != var}
    # The driver reads the visibility variable once per process: every device needs a process without it.
    every = subprocess.run([sys.executable, os.path.abspath(__file__), LIST_DEVICES], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    lines = [l for l in every.stdout.splitlines() if l.startswith(RESULT_PREFIX)]
    if every.returncode != 0 or not lines:
        raise InspectionFailed("cuda", f"listing every device (without {var}) failed with exit {every.returncode}: "
                               f"{(every.stderr or every.stdout).strip()[-500:]}",
                               "Run the engine's runtime where the NVIDIA driver is installed.")
    devices = json.loads(lines[-1][len(RESULT_PREFIX):])
    say(f"ok   CUDA ({binding}) lists {len(devices)} device(s); {var}={os.environ.get(var)} makes {len(visible)} visible")
    return {"binding": binding, "visibility_env": var, "visible_devices": os.environ.get(var),
            "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER") or "FASTEST_FIRST",
            "devices": devices, "visible": visible}


INSPECTIONS = {"model-dimensions": dimensions, "handshake-policy": handshake, "block-grouping": block_grouping,
               "cuda-devices": cuda_devices}


def emit(ok, result=None, failure=None):
    print(RESULT_PREFIX + json.dumps({"ok": ok, "result": result, "failure": failure}, sort_keys=True), flush=True)


def main(argv):
    if argv[1:] == [LIST_DEVICES]:
        print(RESULT_PREFIX + json.dumps(driver_devices()[1]), flush=True)
        return 0
    try:
        with open(argv[1], encoding="utf-8") as handle:
            plan = json.load(handle)
        if plan.get("mode") not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
    except (IndexError, OSError, ValueError) as exc:
        emit(False, failure={"check": "input", "message": f"inspection input is invalid: {exc}",
                             "fix": "Regenerate the input from the checked plan."})
        return 2
    say(f"inspecting {plan['mode']} for plan {plan.get('plan_sha256')} with {sys.executable}")
    try:
        result = INSPECTIONS[plan["mode"]](plan)
    except InspectionFailed as exc:
        say(f"FAIL {exc.check}: {exc.message}")
        emit(False, failure={"check": exc.check, "message": exc.message, "fix": exc.fix})
        return 1
    emit(True, result=result)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as exc:  # noqa: BLE001 - never end with a bare traceback
        emit(False, failure={"check": "internal", "message": f"{type(exc).__name__}: {exc}",
                             "fix": "Report this inspection-script error with its output."})
        sys.exit(1)
