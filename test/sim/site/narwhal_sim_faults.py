"""Fault switches shared by the simulator's stand-in packages (not part of vLLM).

NARWHAL_SIM_FAULTS is a comma-separated list of switches, each either a bare
name (``crash_at_start``) or ``name=value`` (``slow_start=5``). A name may repeat
(``missing_metric=a,missing_metric=b``). See test/sim/README.md for the list.
"""
import os

KNOWN = {
    "slow_start", "crash_at_start", "crash_after", "dead_after", "wrong_version",
    "missing_metric", "tokenizer_error", "no_nixl", "no_ssm_layout",
}


def faults(environ=None):
    """Return {name: [values]} for the switches set in the environment."""
    raw = (environ if environ is not None else os.environ).get("NARWHAL_SIM_FAULTS", "")
    found = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, value = item.partition("=")
        found.setdefault(name.strip(), []).append(value.strip())
    return found


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
