"""Run a command and report its wall time and the CPU the kernel accounted to it once reaped.

    python3 bench/rusage.py COMMAND [ARG...] 3>REPORT

The report goes to file descriptor 3, which the caller opens (bench/measure.mjs does), one line:
"<wall s> <user s> <sys s> <peak RSS KiB>", with the CPU from wait4's rusage in microseconds.
GNU time, which the benchmarks used before, prints %U and %S in hundredths, each truncated: a
node start of 0.022 s of CPU showed as 0.01 or 0.02. Like GNU time, the rusage counts the command
and the descendants it waited for, the exit code is the command's (128 + N when signal N ended
it), and the wrapper ignores SIGINT and SIGQUIT while it waits (the terminal sends them to the
command too; the report still comes). A SIGTERM or SIGHUP to the wrapper alone is passed on to
the command. The peak RSS is never below this Python's own at the fork (~7 MB with -I -S: the
kernel keeps the larger of the image before and after exec), below any node's. On fd 3 rather
than after the command's stderr, so a command whose stderr ends without a newline cannot
garble the report.
"""

import os
import signal
import sys
import time


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: rusage.py COMMAND [ARG...] 3>REPORT", file=sys.stderr)
        return 2
    try:
        os.fstat(3)
    except OSError:
        print("rusage.py: file descriptor 3 is not open: run it as `rusage.py COMMAND 3>REPORT`", file=sys.stderr)
        return 2
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        # The command gets the dispositions a shell would give it: Python ignores SIGPIPE and SIGXFSZ,
        # and an ignored signal stays ignored across exec (posix_spawn also leaves glibc's internal ones ignored).
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        os.close(3)  # the report's pipe is not the command's: a daemon it leaves must not hold it open
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        except OSError as err:  # a shell's 126 (not executable) or 127 (not found)
            print(f"rusage.py: cannot run {sys.argv[1]}: {err.strerror}", file=sys.stderr)
            os._exit(126 if isinstance(err, PermissionError) else 127)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda received, _frame: os.kill(pid, received))
    _, status, usage = os.wait4(pid, 0)  # retried after a passed-on signal's handler (PEP 475)
    wall = time.monotonic() - start
    with os.fdopen(3, "w") as report:
        report.write(f"{wall:.6f} {usage.ru_utime:.6f} {usage.ru_stime:.6f} {usage.ru_maxrss}\n")
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
