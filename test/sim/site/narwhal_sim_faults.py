"""Fault switches shared by the simulator's stand-in packages (not part of vLLM).

NARWHAL_SIM_FAULTS is a comma-separated list of switches, each either a bare
name (``crash_at_start``) or ``name=value`` (``slow_start=5``). A name may repeat
(``missing_metric=a,missing_metric=b``); ``name@engine-2`` applies only to the engine
whose NARWHAL_ENGINE is engine-2. NARWHAL_SIM_FAULTS_FILE names a file holding more switches
(commas or newlines), re-read on every call, so a test can turn a fault on in a running engine.
See test/sim/README.md for the list.
"""
import os

KNOWN = {
    "slow_start", "crash_at_start", "crash_after", "dead_after", "wrong_version",
    "missing_metric", "tokenizer_error", "no_nixl", "no_ssm_layout", "log_flood", "ignore_api_key",
    "slow_stop", "gpu_extra_mib",
    # the probe's failing paths (read per request): another /health status, model, start time; no completion text
    "health_status", "served_model_name", "start_time_offset", "empty_completion",  # gpu_extra_mib is read by the nvidia-smi stand-in (test/sim/bin), not by the engine
    # NIXL KV transfer (vllm/_narwhal_sim/kv_transfer.py)
    "kv_transfer_fail", "kv_slow", "kv_handshake_refuse", "kv_silent_recompute", "kv_corrupt_blocks", "kv_stale_peer_metadata",
}


def faults(environ=None):
    """Return {name: [values]} for the switches set in the environment."""
    env = environ if environ is not None else os.environ
    raw = env.get("NARWHAL_SIM_FAULTS", "") + "," + _file_faults(env.get("NARWHAL_SIM_FAULTS_FILE"))
    found = {}
    for item in raw.replace("\n", ",").split(","):
        item = item.strip()
        if "@" in item:
            # "switch@engine-2" applies only to the engine the launcher names engine-2 (NARWHAL_ENGINE),
            # so engines of one group (same runtime environment) can fail one at a time.
            item, scope = item.rsplit("@", 1)
            if scope.strip() != env.get("NARWHAL_ENGINE"):
                continue
        if not item:
            continue
        name, _, value = item.partition("=")
        found.setdefault(name.strip(), []).append(value.strip())
    return found


def _file_faults(path):
    """The runtime switch file's text; a missing or unreadable file holds no switches (the test has not written it)."""
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def has(name, environ=None):
    return name in faults(environ)


def value(name, default=None, environ=None):
    values = faults(environ).get(name)
    if not values or values[-1] == "":
        return default
    return values[-1]


def values(name, environ=None):
    return [v for v in faults(environ).get(name, []) if v]


def unknown(environ=None):
    return sorted(set(faults(environ)) - KNOWN)
