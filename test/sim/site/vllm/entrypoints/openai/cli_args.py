"""Stand-in for ``vllm/entrypoints/openai/cli_args.py``: the serving command line.

``make_arg_parser(parser)`` registers, on a FlexibleArgumentParser (vllm.utils), the positional
model tag, ``--headless``, ``--api-server-count``, ``--config`` and the subset of vLLM 0.11's
FrontendArgs and EngineArgs flags listed in test/sim/README.md; every other flag is an argparse
error. ``validate_parsed_serve_args(args)`` runs vLLM's quick checks that raise before loading.
Both ``python -m vllm.entrypoints.openai.api_server`` and ``vllm serve`` parse with them.
"""
import argparse
import json
from pathlib import Path

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


def make_arg_parser(parser):
    """Register the serve arguments on ``parser`` (a FlexibleArgumentParser), as vLLM's does."""
    add = parser.add_argument
    add("model_tag", type=str, nargs="?", help="The model tag to serve (optional if specified in config)")
    add("--headless", action="store_true", default=False)
    add("--api-server-count", "-asc", type=int, default=1)
    add("--config", help="Read CLI options from a config file (not supported by the simulator).")
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
    return parser


def validate_chat_template(chat_template):
    """vllm.entrypoints.chat_utils.validate_chat_template: a path-like template must exist."""
    if chat_template is None:
        return
    if not any(c in chat_template for c in "{}\n") and not Path(chat_template).exists():
        raise ValueError(f"The supplied chat template string ({chat_template}) appears path-like, but doesn't exist!")


def validate_parsed_serve_args(args):
    """Quick checks for model serve args that raise prior to loading."""
    if hasattr(args, "subparser") and args.subparser != "serve":
        return
    validate_chat_template(args.chat_template)
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
