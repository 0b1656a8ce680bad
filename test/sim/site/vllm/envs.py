"""vLLM's environment-variable registry (stand-in for ``vllm/envs.py``).

Like the real module, ``environment_variables`` maps each known name to a
getter and module attribute access reads the environment lazily. Only the
variables the simulator uses are listed. The fault switch ``no_ssm_layout``
removes VLLM_SSM_CONV_STATE_LAYOUT, as in vLLM releases that predate it.
"""
import os
from typing import Any, Callable

import narwhal_sim_faults


def _choice(name, default, choices):
    def getter():
        value = os.environ.get(name, default)
        if value is not None and value not in choices:
            raise ValueError(f"Invalid value '{value}' for {name}. Valid options: {list(choices)}.")
        return value
    return getter


environment_variables: dict[str, Callable[[], Any]] = {
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    "VLLM_PORT": lambda: int(os.environ["VLLM_PORT"]) if "VLLM_PORT" in os.environ else None,
    "VLLM_API_KEY": lambda: os.environ.get("VLLM_API_KEY", None),
    "VLLM_USE_V1": lambda: bool(int(os.getenv("VLLM_USE_V1", "1"))),
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(),
    "VLLM_NIXL_SIDE_CHANNEL_HOST": lambda: os.getenv("VLLM_NIXL_SIDE_CHANNEL_HOST", "localhost"),
    "VLLM_NIXL_SIDE_CHANNEL_PORT": lambda: int(os.getenv("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600")),
    "VLLM_NIXL_ABORT_REQUEST_TIMEOUT": lambda: int(os.getenv("VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "480")),
    "VLLM_KV_CACHE_LAYOUT": _choice("VLLM_KV_CACHE_LAYOUT", None, ("NHD", "HND")),
    "VLLM_SSM_CONV_STATE_LAYOUT": _choice("VLLM_SSM_CONV_STATE_LAYOUT", None, ("SD", "DS")),
}

if narwhal_sim_faults.has("no_ssm_layout"):
    del environment_variables["VLLM_SSM_CONV_STATE_LAYOUT"]


def __getattr__(name):
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return list(environment_variables.keys())


def is_set(name):
    if name not in environment_variables:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return name in os.environ
