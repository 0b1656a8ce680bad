"""Startup sequence of the simulated engine, in the order vLLM 0.11 does it:
claim the HTTP port, resolve model and tokenizer, start workers (per TP rank),
create the KV connector and its NIXL side channel, size the KV cache, then
listen. Exit 1 on a failed start, 0 on SIGTERM/SIGINT."""
import os
import signal
import socket
import sys
import threading
import time
import types
import uuid

import narwhal_sim_faults as faults
from vllm import version
from vllm._narwhal_sim import model as model_mod
from vllm._narwhal_sim.kv_transfer import KVTransfer
from vllm._narwhal_sim.metrics import Metrics
from vllm._narwhal_sim.model import StartupError
from vllm._narwhal_sim.server import State, create_server, is_ipv6, make_handler
from vllm.logger import emit

GIB = 1 << 30


def _uvicorn(message):
    sys.stderr.write(f"(APIServer pid={os.getpid()}) INFO:     {message}\n")
    sys.stderr.flush()


def _fail(lines, prefix="APIServer"):
    """Print a failed start the way vLLM does (traceback tail) and return exit code 1."""
    head = f"({prefix} pid={os.getpid()}) "
    if prefix != "APIServer":
        emit("ERROR", "EngineCore failed to start.", prefix=prefix, where="core.py:708")
    out = [head + "Traceback (most recent call last):",
           head + '  File "<frozen runpy>", line 198, in _run_module_as_main']
    out += [head + line for line in lines]
    if prefix != "APIServer":
        out += [f"(APIServer pid={os.getpid()}) RuntimeError: Engine core initialization failed. "
                "See root cause above. Failed core proc(s): {}"]
    sys.stderr.write("\n".join(out) + "\n")
    sys.stderr.flush()
    return 1


def _rank_prefix(rank, tp):
    return f"Worker_TP{rank}" if tp > 1 else "EngineCore_DP0"


def _kv_config(args):
    """KVTransferConfig validation and connector creation through KVConnectorFactory."""
    cfg = args.kv_transfer_config
    if cfg is None:
        return None
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector import KV_ROLES, LOAD_FAILURE_POLICIES
    if cfg.get("kv_connector") and cfg.get("kv_role") not in KV_ROLES:
        raise StartupError(f"ValueError: Unsupported kv_role: {cfg.get('kv_role')}. "
                           f"Supported roles are {KV_ROLES}")
    policy = cfg.get("kv_load_failure_policy", "recompute")
    if policy not in LOAD_FAILURE_POLICIES:
        raise StartupError(f"ValueError: Unsupported kv_load_failure_policy: {policy}. "
                           f"Supported policies are {LOAD_FAILURE_POLICIES}")
    return types.SimpleNamespace(**{"engine_id": str(uuid.uuid4()), "kv_connector_module_path": None,
                                    "kv_connector_extra_config": {}, **cfg})


def environ_backend():
    """VLLM_ATTENTION_BACKEND as vLLM's selector reads it (the sim has no --attention-backend flag)."""
    return os.environ.get("VLLM_ATTENTION_BACKEND") or None


def _bind_side_channel(host, port):
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        shown = f"[{host}]" if is_ipv6(host) else host
        raise StartupError(f"zmq.error.ZMQError: Address already in use (addr='tcp://{shown}:{port}')",
                           prefix="EngineCore_DP0") from None
    sock.listen(16)
    return sock


def run(args):
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    environ = os.environ
    tp = args.tensor_parallel_size
    emit("INFO", "vLLM API server version %s", version.__version__, where="api_server.py:1839")
    for name in faults.unknown():
        emit("WARNING", "narwhal simulator: unknown fault switch %r ignored", name, where="engine.py:0")
    shown = {k: ("<redacted>" if k == "api_key" else v) for k, v in getattr(args, "_non_default", {}).items()}
    emit("INFO", "non-default args: %s", shown, where="utils.py:233")
    if args.pipeline_parallel_size != 1 or args.data_parallel_size != 1:
        return _fail(["NotImplementedError: narwhal simulator supports tensor parallelism only"])
    if not 0 < args.gpu_memory_utilization <= 1:
        return _fail([f"ValueError: GPU memory utilization must be within (0, 1]. "
                      f"Got {args.gpu_memory_utilization}."])
    api_key = args.api_key or environ.get("VLLM_API_KEY") or None
    try:
        server = create_server(args.host, args.port, None)
    except OSError as exc:
        return _fail([f"OSError: [Errno {exc.errno}] {exc.strerror}"])
    try:
        result = _start(args, environ, tp, stop)
    except StartupError as exc:
        server.server_close()
        return _fail(exc.lines, exc.prefix)
    if result is None:
        server.server_close()
        return 0
    facts, layout, tokenizer, nixl, side = result
    served = args.served_model_name or [args.model]
    state = State(served=served, root=args.model, max_model_len=facts["max_model_len"], api_key=api_key,
                  tokenizer=tokenizer, tp=tp, nixl=nixl, block_size=layout["block_size"],
                  block_bytes=layout["page_size_bytes"] * facts["layers"] * tp,
                  # wrong_version is read per request (server.py); this is its default value.
                  reported_version=version.__version__,
                  wrong_version="0.10.2" if version.__version__ != "0.10.2" else "0.11.0",
                  access_log=not args.disable_uvicorn_access_log,
                  metrics=Metrics(served[0], layout, facts, args, nixl))
    if nixl:
        nixl.metrics, nixl.block_bytes = state.metrics, state.block_bytes
        threading.Thread(target=nixl.sweep_forever, args=(stop,), daemon=True).start()
    if faults.has("ignore_api_key"):
        # An engine that does not enforce its key: at once, or after S seconds of enforcing it.
        after = faults.value("ignore_api_key")
        if not after:
            state.api_key = None
        else:
            timer = threading.Timer(float(after), lambda: setattr(state, "api_key", None))
            timer.daemon = True
            timer.start()
    server.RequestHandlerClass = make_handler(state)
    server.server_activate()
    host = args.host or "0.0.0.0"
    emit("INFO", "Supported_tasks: ['generate']", where="api_server.py:1634")
    emit("INFO", "Starting vLLM API server 0 on http://%s:%d", f"[{host}]" if is_ipv6(host) else host,
         args.port, where="api_server.py:1912")
    _uvicorn(f"Started server process [{os.getpid()}]")
    _uvicorn("Waiting for application startup.")
    _uvicorn("Application startup complete.")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _flood_log(faults.value("log_flood"))
    code = _watch(state, stop)
    server.shutdown()
    server.server_close()
    if side:
        side.close()
    return code


def _flood_log(mib):
    """log_flood=MiB: write that much of periodic-stats logging while serving (a busy engine's log)."""
    if not mib:
        return
    line = ("Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
            "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0% ")
    written, i = 0, 0
    while written < float(mib) * (1 << 20):
        text = f"{line}#{i}"
        emit("INFO", "%s", text, where="loggers.py:123")
        written += len(text) + 60
        i += 1
    emit("INFO", "narwhal simulator: log flood of %s MiB done (%d lines)", mib, i, where="loggers.py:124")


def _hold_start(stop):
    """slow_start=S: S seconds before listening, ended early once the switch is off (re-read every 0.1 s, so a
    test holds a start in its faults file until it has done what it must do meanwhile); True: stopped meanwhile."""
    until = time.monotonic() + float(faults.value("slow_start", "0"))
    while faults.has("slow_start") and (left := until - time.monotonic()) > 0:
        if stop.wait(min(0.1, left)):
            return True
    return stop.is_set()


def _watch(state, stop):
    """Serve until a signal (exit 0) or a scheduled crash (exit 1)."""
    crash_after = faults.value("crash_after")
    dead_after = faults.value("dead_after")
    if dead_after is not None and not stop.wait(float(dead_after)):
        state.dead = True
        emit("ERROR", "EngineCore encountered a fatal error.", prefix="EngineCore_DP0", where="core.py:710")
        emit("ERROR", "AsyncLLM output_handler failed.", where="async_llm.py:480")
    if crash_after is not None:
        if stop.wait(float(crash_after)):
            return _stopped()
        state.dead = True
        emit("ERROR", "EngineCore encountered a fatal error.", prefix="EngineCore_DP0", where="core.py:710")
        _fail(["vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
               "See stack trace (above) for the root cause."])
        return 1
    stop.wait()
    return _stopped()


def _stopped():
    drain = faults.value("slow_stop")
    if drain:
        # A shutdown that takes a while (requests draining), still serving: a stop step stays in flight meanwhile.
        emit("INFO", "narwhal simulator: draining for %s s before shutting down", drain, where="launcher.py:100")
        time.sleep(float(drain))
    emit("INFO", "Shutting down FastAPI HTTP server.", where="launcher.py:101")
    _uvicorn("Shutting down")
    _uvicorn("Finished server process [%d]" % os.getpid())
    return 0


def _start(args, environ, tp, stop):
    """Engine init. Returns None when stopped by a signal, else the facts needed to serve."""
    import transformers

    facts = model_mod.resolve(args, environ)
    kv = _kv_config(args)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(facts["tokenizer"],
                                                               trust_remote_code=args.trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - any tokenizer failure stops the start
        raise StartupError(f"{type(exc).__name__}: {exc}") from None
    emit("INFO", "Using max model len %d", facts["max_model_len"], where="model.py:1510")
    emit("INFO", "Initializing a V1 LLM engine (v%s) with config: model=%r, tokenizer=%r, "
         "trust_remote_code=%s, dtype=torch.%s, max_seq_len=%d, tensor_parallel_size=%d, kv_cache_dtype=%s, "
         "enforce_eager=%s, served_model_name=%s", version.__version__, args.model, facts["tokenizer"],
         args.trust_remote_code, facts["dtype"], facts["max_model_len"], tp, facts["cache_dtype"],
         args.enforce_eager, (args.served_model_name or [args.model])[0],
         prefix="EngineCore_DP0", where="core.py:77")
    weights = facts["weight_bytes"] / tp / GIB
    for rank in range(tp):
        at = _rank_prefix(rank, tp)
        emit("INFO", "rank %d in world size %d is assigned as DP rank 0, PP rank 0, TP rank %d, EP rank %d",
             rank, tp, rank, rank, prefix=at, where="parallel_state.py:1208")
        emit("INFO", "Starting to load model %s...", args.model, prefix=at, where="gpu_model_runner.py:2602")
        emit("INFO", "Using Flash Attention backend on V1 engine.", prefix=at, where="cuda.py:366")
        emit("INFO", "Model loading took %.4f GiB and %.6f seconds", weights, 0.05, prefix=at,
             where="gpu_model_runner.py:2653")
    if faults.has("crash_at_start"):
        raise StartupError("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                           "total capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, "
                           "this process has 78.12 GiB memory in use.", prefix=_rank_prefix(0, tp))
    model_mod.check_ssm_layout(facts, environ)
    nixl, side = None, None
    if kv is not None:
        nixl, side = _connector(kv, facts, args, tp)
    layout = model_mod.kv_layout(facts, args, environ)
    for rank in range(tp):
        emit("INFO", "Available KV cache memory: %.2f GiB", layout["available_bytes"] / GIB,
             prefix=_rank_prefix(rank, tp), where="gpu_worker.py:298")
    emit("INFO", "GPU KV cache size: %s tokens", f"{layout['gpu_kv_cache_tokens']:,}",
         prefix="EngineCore_DP0", where="kv_cache_utils.py:1087")
    emit("INFO", "Maximum concurrency for %s tokens per request: %.2fx", f"{facts['max_model_len']:,}",
         layout["max_concurrency"], prefix="EngineCore_DP0", where="kv_cache_utils.py:1091")
    slow = float(faults.value("slow_start", "0"))
    if not args.enforce_eager:
        emit("INFO", "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", prefix=_rank_prefix(0, tp),
             where="gpu_model_runner.py:3480")
    if _hold_start(stop):
        if side:
            side.close()
        return None
    emit("INFO", "init engine (profile, create kv cache, warmup model) took %.2f seconds", 0.5 + slow,
         prefix="EngineCore_DP0", where="core.py:210")
    return facts, layout, tokenizer, nixl, side


def _connector(kv, facts, args, tp):
    from vllm.distributed.kv_transfer.kv_connector.base import KVConnectorRole
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm import envs
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector import NIXL_CONNECTOR_VERSION

    config = types.SimpleNamespace(kv_transfer_config=kv)
    try:
        for rank in range(tp):
            KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER)
    except (ValueError, RuntimeError, ImportError) as exc:
        raise StartupError(f"{type(exc).__name__}: {exc}", prefix=_rank_prefix(0, tp)) from None
    if kv.kv_connector != "NixlConnector":
        return None, None
    host, port = envs.VLLM_NIXL_SIDE_CHANNEL_HOST, envs.VLLM_NIXL_SIDE_CHANNEL_PORT
    emit("INFO", "Initializing NIXL Scheduler %s", kv.engine_id, prefix="EngineCore_DP0",
         where="nixl_connector.py:288")
    side = _bind_side_channel(host, port)
    emit("INFO", "Starting listening on path: tcp://%s:%d", f"[{host}]" if is_ipv6(host) else host, port,
         prefix="EngineCore_DP0", where="nixl_connector.py:737")
    # vLLM's compute_nixl_compatibility_hash factors, resolved as narwhal's nixl-compat.ts resolves them (so the
    # hash narwhal records before start is the one this engine advertises). kv_handshake_refuse is applied per
    # handshake (kv_transfer.py), so a runtime fault file can turn it on.
    backend = (environ_backend() or "FLASH_ATTN").upper()
    extra = kv.kv_connector_extra_config or {}
    cross = backend in ("FLASH_ATTN", "FLASHINFER") and str(extra.get("enable_cross_layers_blocks", "False")).lower() == "true"
    factors = {"vllm_version": version.__version__, "nixl_connector_version": NIXL_CONNECTOR_VERSION,
               "model": args.model, "dtype": f"torch.{facts['dtype']}", "num_kv_heads": facts["kv_heads"],
               "head_size": facts["head_dim"], "num_hidden_layers": facts["layers"], "attn_backend_name": backend,
               "cache_dtype": facts["cache_dtype"], "cross_layers_blocks": cross}
    meta = {"engine_id": kv.engine_id, "vllm_version": version.__version__, "connector_version": NIXL_CONNECTOR_VERSION,
            "model": args.model, "dtype": facts["dtype"], "num_kv_heads": facts["kv_heads"],
            "head_size": facts["head_dim"], "num_layers": facts["layers"], "attn_backend": backend,
            "cache_dtype": facts["cache_dtype"], "block_size": facts["block_size"], "tp_size": tp,
            "kv_role": kv.kv_role, "backends": extra.get("backends", ["UCX"])}
    transfer = KVTransfer(kv.engine_id, host, port, meta, factors, getattr(kv, "kv_load_failure_policy", "recompute"),
                          _rank_prefix(0, tp), envs.VLLM_NIXL_ABORT_REQUEST_TIMEOUT)
    threading.Thread(target=transfer.serve, args=(side,), daemon=True).start()
    return transfer, side
