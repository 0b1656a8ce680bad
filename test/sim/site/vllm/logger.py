"""vLLM-style logging: ``INFO 10-05 12:00:00 [file.py:123] message`` on stdout.

Real vLLM prefixes every line of a child process with ``(EngineCore_DP0 pid=N)``
or ``(Worker_TP0 pid=N)``; the API server process gets ``(APIServer pid=N)``.
The simulator is one process and passes the prefix explicitly.
"""
import logging
import os
import sys
import time

_LEVEL = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper()


def _line(level, prefix, where, message):
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime())
    head = f"({prefix} pid={os.getpid()}) " if prefix else ""
    return f"{head}{level} {stamp} [{where}] {message}"


def emit(level, message, *args, prefix="APIServer", where=None, stream=None):
    """Write one vLLM-format line. ``where`` defaults to the caller's file:line."""
    if args:
        message = message % args
    if where is None:
        frame = sys._getframe(1)
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    out = stream or (sys.stderr if level in ("ERROR", "CRITICAL") else sys.stdout)
    out.write(_line(level, prefix, where, message) + "\n")
    out.flush()


class _Logger(logging.LoggerAdapter):
    def log(self, level, msg, *args, **kwargs):
        if level < logging.getLevelName(_LEVEL):
            return
        frame = sys._getframe(2)
        emit(logging.getLevelName(level), msg, *args, prefix=None,
             where=f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")

    def info_once(self, msg, *args, **kwargs):
        self.info(msg, *args)

    def warning_once(self, msg, *args, **kwargs):
        self.warning(msg, *args)


def init_logger(name):
    return _Logger(logging.getLogger(name), {})
