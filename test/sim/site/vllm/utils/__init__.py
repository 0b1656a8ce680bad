"""Stand-in for the parts of ``vllm.utils`` the simulator needs: ``FlexibleArgumentParser``.

vLLM 0.11.0 defines FlexibleArgumentParser in ``vllm/utils/__init__.py`` (later releases move it
to ``vllm/utils/argparse_utils.py``). Like vLLM's, it is an ``argparse.ArgumentParser`` that:

- accepts ``--flag_name`` for ``--flag-name`` (underscores become dashes in the option name, up to
  the first ``.``; the value after ``=`` is kept as written);
- with ``serve`` as the first argument, moves ``--model M`` / ``--model=M`` to the positional
  model tag (``vllm serve -tp 2 --model M`` parses as ``vllm serve M -tp 2``), erroring as vLLM does
  on ``--model`` without a value, and refuses ``--served-model-name`` without a positional model;
- otherwise behaves as argparse: an unknown flag or a bad value prints usage and
  ``<prog>: error: ...`` on stderr and exits 2.

Not simulated: ``--config FILE`` (YAML) is refused with an argparse error, and dotted JSON
arguments (``--compilation-config.level 3``) are not expanded.
"""
import argparse
import re
import sys

from vllm.logger import emit

_MODEL = re.compile(r"^--model(=.+|$)")
_SERVED_NAME = re.compile(r"^--served[-_]model[-_]name(=.+|$)")
_CONFIG = re.compile(r"^--config(=.+|$)")
# Everything between the leading -- and the first "." is the option name.
_NAME = re.compile(r"(?<=--)[^.]*")


class FlexibleArgumentParser(argparse.ArgumentParser):
    """ArgumentParser that allows both underscore and dash in names."""

    def parse_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        if args and args[0] == "serve":
            args = self._model_to_positional(args)
        if any(_CONFIG.match(a) for a in args):
            self.error("argument --config: not supported by the narwhal simulator")
        processed = []
        for arg in args:
            if arg.startswith("--"):
                key, sep, value = arg.partition("=")
                processed.append(_NAME.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + sep + value)
            else:
                processed.append(arg)
        return super().parse_args(processed, namespace)

    def _model_to_positional(self, args):
        index = next((i for i, a in enumerate(args) if _MODEL.match(a)), None)
        if index is not None:
            emit("WARNING", "With `vllm serve`, you should provide the model as a positional argument or in a "
                 "config file instead of via the `--model` option.", where="__init__.py:1908")
            if args[index] == "--model":
                if index + 1 >= len(args) or args[index + 1].startswith("-"):
                    self.error("argument --model: expected one argument")
                tag, rest = args[index + 1], index + 2
            else:
                tag, rest = args[index][len("--model="):], index + 1
            args = ["serve", tag, *args[1:index], *args[rest:]]
        if len(args) > 1 and args[1].startswith("-") and any(_SERVED_NAME.match(a) for a in args):
            raise ValueError("`model` should be provided as the first positional argument when using "
                             "`vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
        return args
