"""Stand-in for ``vllm/entrypoints/cli/serve.py``: the ``vllm serve`` subcommand.

``ServeSubcommand().subparser_init(subparsers)`` adds the ``serve`` parser and registers the
serve arguments on it with ``make_arg_parser``, as vLLM does; ``validate`` runs
``validate_parsed_serve_args``; ``cmd`` lets the positional model tag take precedence over
``--model`` and serves.
"""
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args


class ServeSubcommand:
    """The `serve` subcommand for the vLLM CLI."""

    name = "serve"

    def __init__(self):
        self.parser = None

    def cmd(self, args):
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        from vllm.entrypoints.openai.api_server import run_server
        return run_server(args, self.parser)

    def validate(self, args):
        validate_parsed_serve_args(args)

    def subparser_init(self, subparsers):
        serve_parser = subparsers.add_parser(
            self.name, help="Start the vLLM OpenAI Compatible API server.",
            description="Start the vLLM OpenAI Compatible API server.", usage="vllm serve [model_tag] [options]")
        self.parser = make_arg_parser(serve_parser)
        return self.parser


def cmd_init():
    return [ServeSubcommand()]
