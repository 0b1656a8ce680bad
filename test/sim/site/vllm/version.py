"""vLLM's version module (stand-in). Real vLLM reads ``vllm/_version.py``.

NARWHAL_SIM_VLLM_VERSION overrides ``__version__`` without touching the
distribution metadata, which stays at 0.11.0: that is how a runtime whose import
version disagrees with its package pin is simulated.
"""
import os

_DIST_VERSION = "0.11.0"
__version__ = os.environ.get("NARWHAL_SIM_VLLM_VERSION") or _DIST_VERSION
__version_tuple__ = tuple(int(p) if p.isdigit() else p for p in __version__.split("+")[0].split("."))
