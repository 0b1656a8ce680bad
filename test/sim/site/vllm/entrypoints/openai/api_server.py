"""Simulated ``python3 -m vllm.entrypoints.openai.api_server``.

The parser accepts the vLLM 0.11 flags a launcher writes (FlexibleArgumentParser
also accepts ``--max_model_len`` spellings) and exits 2 on anything else, like
argparse in the real server. The engine itself lives in vllm._narwhal_sim.
"""
import argparse
import json
import sys

KV_TRANSFER_FIELDS = {"kv_connector", "engine_id", "kv_buffer_device", "kv_buffer_size", "kv_role", "kv_rank",
                      "kv_parallel_size", "kv_ip", "kv_port", "kv_connector_extra_config",
                      "kv_connector_module_path", "enable_permute_local_kv", "kv_load_failure_policy"}
KV_CACHE_DTYPES = ["auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]
Bool = argparse.BooleanOptionalAction


def kv_transfer_config(text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    unknown = sorted(set(value) - KV_TRANSFER_FIELDS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unexpected KVTransferConfig field(s) {unknown}")
    return value


def json_or_level(text):
    if text.isdigit():
        return {"level": int(text)}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(f"invalid compilation config {text!r}") from None


def optional_str(text):
    return None if text.lower() == "none" else text


def make_arg_parser():
    p = argparse.ArgumentParser(prog="vllm.entrypoints.openai.api_server",
                                description="vLLM OpenAI-Compatible RESTful API server (narwhal simulator).")
    add = p.add_argument
    # Frontend
    add("--host", type=optional_str, default=None)
    add("--port", type=int, default=8000)
    add("--uvicorn-log-level", choices=["critical", "debug", "error", "info", "trace", "warning"], default="info")
    add("--disable-uvicorn-access-log", action=Bool, default=False)
    add("--api-key", type=optional_str, default=None)
    add("--served-model-name", nargs="+", default=None)
    add("--disable-log-requests", action="store_true", help="deprecated; requests are not logged by default")
    add("--enable-log-requests", action=Bool, default=False)
    add("--disable-log-stats", action="store_true")
    add("--disable-fastapi-docs", action=Bool, default=False)
    add("--root-path", default=None)
    add("--reasoning-parser", default="")
    add("--enable-auto-tool-choice", action=Bool, default=False)
    add("--tool-call-parser", default=None)
    add("--chat-template", default=None)
    add("--response-role", default="assistant")
    # Model
    add("--model", default="Qwen/Qwen3-0.6B")
    add("--tokenizer", default=None)
    add("--hf-config-path", default=None)
    add("--trust-remote-code", action=Bool, default=False)
    add("--dtype", choices=["auto", "bfloat16", "float", "float16", "float32", "half"], default="auto")
    add("--seed", type=int, default=None)
    add("--max-model-len", default=None)
    add("--enforce-eager", action=Bool, default=False)
    add("--revision", default=None)
    add("--tokenizer-revision", default=None)
    add("--tokenizer-mode", choices=["auto", "custom", "mistral", "slow"], default="auto")
    add("--generation-config", default="auto")
    add("--quantization", "-q", default=None)
    add("--load-format", default="auto")
    add("--language-model-only", action=Bool, default=False)
    add("--max-logprobs", type=int, default=20)
    # Parallelism
    add("--tensor-parallel-size", "-tp", type=int, default=1)
    add("--pipeline-parallel-size", "-pp", type=int, default=1)
    add("--data-parallel-size", "-dp", type=int, default=1)
    add("--distributed-executor-backend", choices=["external_launcher", "mp", "ray", "uni"], default=None)
    add("--disable-custom-all-reduce", action=Bool, default=False)
    # Cache
    add("--block-size", type=int, choices=[1, 8, 16, 32, 64, 128], default=None)
    add("--gpu-memory-utilization", type=float, default=0.9)
    add("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default="auto")
    add("--enable-prefix-caching", action=Bool, default=None)
    add("--swap-space", type=float, default=4)
    add("--calculate-kv-scales", action=Bool, default=False)
    # Scheduler
    add("--max-num-seqs", type=int, default=None)
    add("--max-num-batched-tokens", default=None)
    add("--enable-chunked-prefill", action=Bool, default=None)
    add("--async-scheduling", action=Bool, default=False)
    add("--disable-hybrid-kv-cache-manager", action=Bool, default=False)
    # Transfer, compilation
    add("--kv-transfer-config", type=kv_transfer_config, default=None)
    add("--compilation-config", "-O", type=json_or_level, default=None)
    return p


def normalize_argv(argv):
    """FlexibleArgumentParser: ``--max_model_len=8`` is ``--max-model-len=8``."""
    out = []
    for arg in argv:
        if arg.startswith("--"):
            key, sep, val = arg.partition("=")
            arg = key.replace("_", "-") + sep + val
        out.append(arg)
    return out


def main(argv=None):
    parser = make_arg_parser()
    args = parser.parse_args(normalize_argv(sys.argv[1:] if argv is None else argv))
    defaults = vars(parser.parse_args([]))
    args._non_default = {k: v for k, v in vars(args).items() if v != defaults.get(k)}
    from vllm._narwhal_sim.engine import run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
