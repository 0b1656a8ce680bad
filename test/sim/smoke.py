#!/usr/bin/python3
"""Smoke test for the vLLM simulator and src/phases/check_runtime.py (stdlib only).

    /usr/bin/python3 test/sim/smoke.py

Starts every server on 127.0.0.1 with fresh high ports, stops each by its own pid,
and exits non-zero on the first failed expectation.
"""
import concurrent.futures
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "site")
MODELS = os.path.join(HERE, "models")
CHECK = os.path.join(HERE, "..", "..", "src", "phases", "check_runtime.py")
PY = "/usr/bin/python3"
NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_load_failure_policy": "fail",
                   "kv_connector_extra_config": {"backends": ["UCX"]}})
PINS = {"vllm": "0.11.0", "nixl": "0.6.1", "transformers": "4.57.1"}
procs = []
logs = []


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env(**extra):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NARWHAL_SIM", "VLLM_"))}
    base["PYTHONPATH"] = SITE
    base.update({k: str(v) for k, v in extra.items()})
    return base


def expect(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"  ok  {what}")


def all_ready(engines, timeout=10):
    """Each engine seen answering /health 200 once, polled in turn: a fault that ends an engine's readiness
    soon after (dead_after, crash_after) is seen inside its window however many start together."""
    deadline = time.time() + timeout
    pending = list(engines)
    while pending and time.time() < deadline:
        for e in list(pending):
            if e.proc.poll() is not None:
                return False
            try:
                if e.get("/health")[0] == 200:
                    pending.remove(e)
            except OSError:
                time.sleep(0.1 / len(pending))
    return not pending


class Engine:
    def __init__(self, model="tiny-llama", extra=(), tp=2, nixl=True, serve=False, port=None, side=None, **environ):
        # port/side: reuse an earlier engine's addresses (a restart in place); fresh free ports otherwise.
        self.port, self.side = port or free_port(), side or free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="sim-", suffix=".log", delete=False)
        logs.append(self.log.name)
        # serve: the `vllm serve MODEL` form (the CLI's serve subcommand, model as the positional tag).
        entry = ["vllm.entrypoints.cli.main", "serve"] if serve else ["vllm.entrypoints.openai.api_server", "--model"]
        args = [PY, "-m", *entry, os.path.join(MODELS, model),
                "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(self.port),
                "--tensor-parallel-size", str(tp), "--no-enable-prefix-caching", *extra]
        if nixl:
            args += ["--kv-transfer-config", NIXL]
        environ.setdefault("VLLM_NIXL_SIDE_CHANNEL_PORT", self.side)
        self.proc = subprocess.Popen(args, env=env(**environ), stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        procs.append(self.proc)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path, key=None, body=None):
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer " + key
        data = json.dumps(body).encode() if body is not None else None
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url(path), data=data, headers=headers),
                                        timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def ready(self, timeout=10):
        return all_ready([self], timeout)

    def wait(self, timeout=10):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(5)

    def output(self):
        with open(self.log.name) as handle:
            return handle.read()


def server_tests():
    print("server: TP 2, NIXL, api key")
    e = Engine(extra=["--api-key", "k3y"])
    expect(e.ready(), "ready")
    expect(e.get("/health") == (200, ""), "/health 200 with empty body")
    expect(json.loads(e.get("/version")[1]) == {"version": "0.11.0"}, "/version is 0.11.0")
    expect(e.get("/v1/models")[0] == 401, "/v1/models needs the key")
    expect(e.get("/v1/models", key="wrong")[0] == 401, "wrong key rejected")
    models = json.loads(e.get("/v1/models", key="k3y")[1])
    card = models["data"][0]
    expect(models["object"] == "list" and card["id"] == "tiny" and card["owned_by"] == "vllm"
           and card["root"].endswith("tiny-llama") and card["max_model_len"] == 4096, "/v1/models shape")
    body = {"model": "tiny", "prompt": "The sea is", "max_tokens": 32, "temperature": 0}
    expect(e.get("/v1/completions", body=body)[0] == 401, "/v1/completions needs the key")
    first = json.loads(e.get("/v1/completions", key="k3y", body=body)[1])
    second = json.loads(e.get("/v1/completions", key="k3y", body=body)[1])
    expect(first["choices"][0]["text"] and first["choices"][0]["text"] == second["choices"][0]["text"],
           "completion deterministic and non-empty")
    expect(first["usage"]["completion_tokens"] == 32, "usage counts max_tokens")
    status, metrics = e.get("/metrics")
    expect(status == 200, "/metrics open without key")
    start = float(re.search(r"^process_start_time_seconds (\S+)$", metrics, re.M).group(1))
    expect(abs(start - time.time()) < 60, "process_start_time_seconds is this process's start")
    for name in ("vllm:cache_config_info{", "vllm:kv_cache_usage_perc{", "vllm:num_requests_running{",
                 "vllm:nixl_bytes_transferred_sum{", "vllm:nixl_num_failed_transfers_total{"):
        expect(name in metrics, f"metric {name.rstrip('{')}")
    blocks = re.search(r'num_gpu_blocks="(\d+)"', metrics).group(1)
    with socket.create_connection(("localhost", e.side), timeout=2) as sock:
        meta = json.loads(sock.makefile().readline())
    expect(meta["tp_size"] == 2 and meta["num_kv_heads"] == 2, "NIXL side channel answers with metadata")
    t0 = time.time()
    expect(e.stop() == 0 and time.time() - t0 < 3, "SIGTERM exits 0 quickly")
    log = e.output()
    for rank in (0, 1):
        expect(f"(Worker_TP{rank} pid=" in log, f"Worker_TP{rank} log lines")
    kv = re.search(r"GPU KV cache size: ([\d,]+) tokens", log).group(1)
    expect(int(kv.replace(",", "")) == int(blocks) * 16, "KV tokens = num_gpu_blocks * block_size")
    expect(re.search(r"Maximum concurrency for 4,096 tokens per request: \d+\.\d\dx", log), "concurrency line")
    expect("Application startup complete." in log, "uvicorn startup line")

    print("server: determinism, VLLM_API_KEY, version override, GGUF")
    e2 = Engine(VLLM_API_KEY="envkey", NARWHAL_SIM_VLLM_VERSION="0.11.1")
    expect(e2.ready(), "ready")
    expect(e2.get("/v1/models")[0] == 401 and e2.get("/v1/models", key="envkey")[0] == 200, "VLLM_API_KEY honoured")
    expect(json.loads(e2.get("/version")[1])["version"] == "0.11.1", "NARWHAL_SIM_VLLM_VERSION reported")
    e2.stop()
    expect(f"GPU KV cache size: {kv} tokens" in e2.output(), "same inputs give the same KV layout")
    g = Engine(model="tiny-llama-gguf/tiny-llama.Q8_0.gguf", tp=1, extra=[
        "--tokenizer", os.path.join(MODELS, "tiny-llama"), "--hf-config-path", os.path.join(MODELS, "tiny-llama")])
    expect(g.ready(), "GGUF file with --tokenizer/--hf-config-path starts")
    expect("(EngineCore_DP0 pid=" in g.output() and "Worker_TP" not in g.output(), "TP 1 logs from EngineCore")
    g.stop()
    v = Engine(tp=1, serve=True)
    expect(v.ready() and '"id": "tiny"' in v.get("/v1/models")[1], "vllm serve MODEL starts and serves")
    v.stop()
    v = Engine(tp=1, serve=True, extra=["--no-such-flag"])
    expect(v.wait() == 2 and "vllm: error: unrecognized arguments: --no-such-flag" in v.output(),
           "vllm serve rejects an unknown flag -> exit 2")

    print("server: startup failures")
    cases = [
        (dict(extra=["--no-such-flag"]), 2, "unrecognized arguments"),
        (dict(extra=["--kv-transfer-config", "{bad"]), 2, "invalid JSON"),
        (dict(model="tiny-remote-code"), 1, "trust_remote_code=True"),
        (dict(model="tiny-mamba"), 1, "VLLM_SSM_CONV_STATE_LAYOUT=DS"),
        (dict(model="tiny-mamba", VLLM_SSM_CONV_STATE_LAYOUT="XY"), 1, "Invalid value 'XY'"),
        (dict(tp=3), 1, "must be divisible by tensor parallel size (3)"),
        (dict(CUDA_VISIBLE_DEVICES="0"), 1, "number of visible devices (1)"),
        (dict(NARWHAL_SIM_FAULTS="crash_at_start"), 1, "CUDA out of memory"),
        (dict(NARWHAL_SIM_FAULTS="tokenizer_error"), 1, "untagged enum ModelWrapper"),
        (dict(NARWHAL_SIM_FAULTS="no_nixl"), 1, "NIXL is not available"),
        (dict(extra=["--max-model-len", "8192"]), 1, "greater than the derived max_model_len"),
        (dict(extra=["--gpu-memory-utilization", "0.1"]), 1, "No available memory for the cache blocks"),
    ]
    # Started together, then each awaited: each exits before it binds a port, so they cannot collide.
    started = [(Engine(**kwargs), kwargs, code, text) for kwargs, code, text in cases]
    for f, kwargs, code, text in started:
        rc = f.wait()
        expect(rc == code and text in f.output(), f"{kwargs} -> exit {code}, '{text}'")
    for model, extra, env_ in (("tiny-remote-code", ["--trust-remote-code"], {}),
                               ("tiny-mamba", [], {"VLLM_SSM_CONV_STATE_LAYOUT": "DS"})):
        ok = Engine(model=model, extra=extra, **env_)
        expect(ok.ready(), f"{model} starts with {extra or env_}")
        ok.stop()

    print("server: ports in use")
    holder = Engine(tp=1)
    expect(holder.ready(), "holder ready")
    clash = Engine(tp=1, VLLM_NIXL_SIDE_CHANNEL_PORT=holder.side)
    expect(clash.wait() == 1 and "Address already in use (addr='tcp://localhost:" in clash.output(),
           "NIXL side-channel port in use -> exit 1")
    busy = subprocess.Popen([PY, "-m", "vllm.entrypoints.openai.api_server", "--model",
                             os.path.join(MODELS, "tiny-llama"), "--host", "127.0.0.1", "--port", str(holder.port)],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(busy)
    out, _ = busy.communicate(timeout=10)
    expect(busy.returncode == 1 and "Address already in use" in out, "HTTP port in use -> exit 1")
    holder.stop()

    print("server: runtime faults")
    # Started together, each on its own fresh ports, so their timers (slow start, crash, death) overlap;
    # the crash and the death are seen ready first, each polled in turn inside its window.
    started = time.time()
    slow = Engine(NARWHAL_SIM_FAULTS="slow_start=2")
    crash = Engine(NARWHAL_SIM_FAULTS="crash_after=1")
    dead = Engine(NARWHAL_SIM_FAULTS="dead_after=0.5")
    wrong = Engine(NARWHAL_SIM_FAULTS="wrong_version,missing_metric=process_start_time_seconds,"
                                      "missing_metric=vllm:cache_config_info")
    expect(all_ready([crash, dead]), "crash_after and dead_after: ready")
    dead_ready = time.time()
    time.sleep(max(0.0, started + 1 - time.time()))
    try:
        early = slow.get("/health")[0]
    except OSError:
        early = None
    expect(early is None, "slow_start: HTTP not listening yet")
    time.sleep(max(0.0, dead_ready + 1 - time.time()))
    expect(dead.get("/health")[0] == 503, "dead_after: /health 503")
    dead.stop()
    expect(crash.wait() == 1 and "EngineDeadError" in crash.output(), "crash_after: then exit 1")
    expect(slow.ready(), "slow_start: ready afterwards")
    slow.stop()
    expect(wrong.ready(), "ready")
    expect(json.loads(wrong.get("/version")[1])["version"] != "0.11.0", "wrong_version")
    metrics = wrong.get("/metrics")[1]
    expect("process_start_time_seconds" not in metrics and "vllm:cache_config_info" not in metrics
           and "vllm:kv_cache_usage_perc" in metrics, "missing_metric drops exactly those families")
    wrong.stop()

    print("server: a start held by the faults file")
    # slow_start in NARWHAL_SIM_FAULTS_FILE holds the start until the switch is turned off, however long it says.
    with tempfile.NamedTemporaryFile("w", prefix="sim-faults-", delete=False) as handle:
        handle.write("slow_start=600\n")
    logs.append(handle.name)
    held = Engine(NARWHAL_SIM_FAULTS_FILE=handle.name)
    deadline = time.time() + 10
    while "Maximum concurrency" not in held.output() and held.proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    expect("Maximum concurrency" in held.output(), "slow_start from the file: the KV cache lines logged")
    try:
        early = held.get("/health")[0]
    except OSError:
        early = None
    expect(early is None, "slow_start from the file: HTTP not listening while the switch is on")
    turned_off = time.time()
    os.unlink(handle.name)
    expect(held.ready() and time.time() - turned_off < 10, "slow_start from the file: ready once the switch is off")
    held.stop()


def run_check(plan_overrides=None, **environ):
    plan = {"plan_sha256": "0" * 64, "expected_packages": dict(PINS), "model_dir": os.path.join(MODELS, "tiny-llama"),
            "tokenizer": None, "hf_config_path": None, "trust_remote_code": False, "kv_connector": "NixlConnector",
            "kv_transfer_config": json.loads(NIXL), "environment": {},
            "serve_command": [PY, "-m", "vllm.entrypoints.openai.api_server", "--model", os.path.join(MODELS, "tiny-llama"),
                              "--kv-transfer-config", NIXL], "extra_args": [],
            # What narwhal passes from model-meta.ts MODEL_RULES; enough of it for tiny-mamba.
            "model_rules": {"conv_ssm_model_types": ["mamba2"], "conv_ssm_config_keys": ["conv_kernel"]}}
    plan.update(plan_overrides or {})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(plan, handle)
    proc = subprocess.run([PY, CHECK, handle.name], env=env(**environ), capture_output=True, text=True, timeout=30)
    os.unlink(handle.name)
    last = proc.stdout.strip().splitlines()[-1]
    expect(last.startswith("NARWHAL_CHECK_RESULT ") and "Traceback" not in proc.stdout + proc.stderr,
           "result line last, no traceback")
    return proc.returncode, json.loads(last.split(" ", 1)[1])


def check_tests():
    print("check_runtime.py")
    m = lambda name: os.path.join(MODELS, name)  # noqa: E731
    rc, r = run_check()
    expect(rc == 0 and r["ok"] and r["vllm_api_version"] == "0.11.0" and r["tokenizer"]["class"] ==
           "LlamaTokenizerFast" and r["connector"]["class"].endswith("nixl_connector.NixlConnector"), "tiny-llama passes")
    failing = [
        ({"expected_packages": dict(PINS, vllm="0.10.2")}, {}, "package", "vllm"),
        ({"expected_packages": dict(PINS, **{"nixl-rocm": "0.6.1"})}, {}, "package", "nixl-rocm"),
        ({}, {"NARWHAL_SIM_VLLM_VERSION": "0.11.1"}, "version", "0.11.1"),
        ({"kv_connector": "FooConnector", "kv_transfer_config": {"kv_connector": "FooConnector",
                                                                 "kv_role": "kv_both"}}, {}, "connector", "Unsupported"),
        ({}, {"NARWHAL_SIM_FAULTS": "no_nixl"}, "connector", "nixl._api"),
        ({"model_dir": m("tiny-remote-code")}, {}, "trust_remote_code", "auto_map"),
        ({"trust_remote_code": True}, {}, "trust_remote_code", "neither"),
        ({"model_dir": m("tiny-mamba")}, {}, "ssm_layout", "VLLM_SSM_CONV_STATE_LAYOUT"),
        ({"model_dir": m("tiny-mamba"), "environment": {"VLLM_SSM_CONV_STATE_LAYOUT": "DS"}},
         {"NARWHAL_SIM_FAULTS": "no_ssm_layout"}, "ssm_layout", "does not support"),
        ({}, {"NARWHAL_SIM_FAULTS": "tokenizer_error"}, "tokenizer", "tiny-llama"),
        ({"tokenizer": m("tiny-llama-gguf")}, {}, "tokenizer", "tiny-llama-gguf"),
        ({"serve_command": [PY, "-m", "vllm.entrypoints.openai.api_server", "--bogus-flag"],
          "extra_args": ["--bogus-flag"]}, {}, "serve_args", "unrecognized arguments: --bogus-flag"),
    ]
    # Each check is its own process on its own plan file: run side by side, read in order.
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: run_check(case[0], **case[1]), failing))
    for (plan, environ, check, text), (rc, r) in zip(failing, results):
        hits = [f for f in r["failures"] if f["check"] == check and text in f["message"] and f["fix"]]
        expect(rc == 1 and not r["ok"] and hits, f"{check} failure naming '{text}'")
    rc, r = run_check({"model_dir": m("tiny-remote-code"), "trust_remote_code": True})
    expect(rc == 0 and r["requires_trust_remote_code"] and r["tokenizer"]["class"] == "TinyRemoteTokenizer",
           "tiny-remote-code passes with --trust-remote-code")
    rc, r = run_check({"model_dir": m("tiny-mamba"), "environment": {"VLLM_SSM_CONV_STATE_LAYOUT": "DS"}})
    expect(rc == 0 and r["ssm"]["required"] and r["ssm"]["layout"] == "DS", "tiny-mamba passes with DS")
    rc, r = run_check({"model_dir": m("tiny-llama-gguf/tiny-llama.Q8_0.gguf"), "tokenizer": m("tiny-llama"),
                       "hf_config_path": m("tiny-llama"),
                       "expected_packages": dict(PINS, **{"vllm-gguf-plugin": "0.1.0"})})
    expect(rc == 0 and r["packages"]["vllm-gguf-plugin"] == "0.1.0", "GGUF plan passes")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"plan_sha256": 1}, handle)
    proc = subprocess.run([PY, CHECK, handle.name], env=env(), capture_output=True, text=True)
    os.unlink(handle.name)
    expect(proc.returncode == 2 and proc.stdout.splitlines()[-1].startswith("NARWHAL_CHECK_RESULT "), "bad input -> 2")


def cleanup():
    """Kill what is still running (each by its own Popen) and remove the engine logs (and a faults file left)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for name in logs:
        if os.path.exists(name):
            os.unlink(name)


if __name__ == "__main__":
    try:
        server_tests()
        check_tests()
        print("smoke: all passed")
    finally:
        cleanup()
