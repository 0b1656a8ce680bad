"""Run a command and report its wall time and the CPU the kernel accounted to it once reaped.

    python3 bench/rusage.py COMMAND [ARG...]

The report goes to file descriptor 3 (the caller opens it; bench/measure.mjs does), one line:
"<wall s> <user s> <sys s> <peak RSS KiB>", with the CPU from wait4's rusage in microseconds. GNU
time, which the benchmarks used before, prints %U and %S in hundredths, each truncated: a node start
of 0.024 s of CPU showed as 0.01, halving the floor every issue-14 ratio is taken against. Like GNU
time, the rusage counts the command and the descendants it waited for; the exit code is the
command's (128 + N when signal N ended it). The peak RSS is never below this Python's own at the fork
(~7 MB with -I -S: the kernel keeps the larger of the image before and after exec), below any node's. On fd 3 rather than after the command's stderr, so a
command whose stderr ends without a newline cannot garble the report.
"""

import os
import sys
import time


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: rusage.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    report = os.fdopen(3, "w")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(3)  # the report's pipe is not the command's: a daemon it leaves must not hold it open
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        except OSError as err:
            print(f"rusage.py: cannot run {sys.argv[1]}: {err.strerror}", file=sys.stderr)
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    report.write(f"{wall:.6f} {usage.ru_utime:.6f} {usage.ru_stime:.6f} {usage.ru_maxrss}\n")
    report.close()
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
