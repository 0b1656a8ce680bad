"""Stand-in for ``vllm/entrypoints/cli/main.py``: the ``vllm`` console script (``serve`` only).

Like vLLM's: a FlexibleArgumentParser with one subparser per subcommand (``dest="subparser"``),
``validate`` of the chosen subcommand, then its ``cmd``.
"""
import importlib.metadata
import sys

from vllm.entrypoints.cli import serve
from vllm.utils import FlexibleArgumentParser


def main(argv=None):
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=importlib.metadata.version("vllm"))
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmds = {}
    for cmd in serve.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        cmds[cmd.name] = cmd
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.subparser in cmds:
        cmds[args.subparser].validate(args)
    if hasattr(args, "dispatch_function"):
        return args.dispatch_function(args)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
