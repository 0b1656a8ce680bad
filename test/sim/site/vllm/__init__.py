"""vLLM stand-in for the narwhal simulator (test/sim). Not an inference engine."""
from .version import __version__, __version_tuple__  # noqa: F401
