"""Simulated ``python3 -m vllm.entrypoints.openai.api_server``.

As in vLLM 0.11, the module's entry point parses with
``make_arg_parser(FlexibleArgumentParser(...))`` (vllm.entrypoints.openai.cli_args, vllm.utils)
and then runs ``validate_parsed_serve_args``: an unknown flag or a bad value is an argparse error
(usage and ``api_server.py: error: ...`` on stderr, exit 2). The engine lives in vllm._narwhal_sim.
"""
import sys

from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils import FlexibleArgumentParser

# Parser bookkeeping, not serving arguments: not part of the "non-default args" line.
HIDDEN = {"model_tag", "subparser", "dispatch_function"}


def run_server(args, parser):
    """Record the flags that differ from the parser's defaults (vLLM logs them), then serve."""
    defaults = vars(parser.parse_args([]))
    args._non_default = {k: v for k, v in vars(args).items() if k not in HIDDEN and v != defaults.get(k)}
    from vllm._narwhal_sim.engine import run
    return run(args)


def main(argv=None):
    parser = make_arg_parser(FlexibleArgumentParser(description="vLLM OpenAI-Compatible RESTful API server."))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    validate_parsed_serve_args(args)
    return run_server(args, parser)


if __name__ == "__main__":
    sys.exit(main())
