"""Simulator internals behind vllm.entrypoints.openai.api_server (not part of vLLM)."""
