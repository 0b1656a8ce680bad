"""Stand-in GGUF loader plugin (dist ``vllm-gguf-plugin``), loaded through the
``vllm.general_plugins`` entry point like a real vLLM plugin."""
__version__ = "0.1.0"
GGUF_MAGIC = b"GGUF"
_registered = False


def register():
    """Called by vLLM's plugin loader; idempotent."""
    global _registered
    _registered = True


def is_gguf(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == GGUF_MAGIC
    except OSError:
        return False
