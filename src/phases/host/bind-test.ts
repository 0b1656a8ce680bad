// The bind test a remote node runs for checkPlannedPorts (ports.ts): argv is
// "<planned host> <port>...", stdout one "<port> <free|ERRNO>" line per port.
// The same steps as the in-process test: a dual-stack "::" bind (0.0.0.0 on a
// host without IPv6), then the planned address itself unless it is a wildcard.
// SO_REUSEADDR as Node's listen() sets it, so a port in TIME_WAIT is not "busy";
// a live listener still refuses the bind with EADDRINUSE.

export const BIND_TEST_PY = `
import errno, socket, sys
def bind(host, port):
    try:
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if host == "::":
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind((host, port))
        s.listen(1)
        return "free"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
host = sys.argv[1]
for p in sys.argv[2:]:
    port = int(p)
    r = bind("::", port)
    if r in ("EAFNOSUPPORT", "EADDRNOTAVAIL"):
        r = bind("0.0.0.0", port)
    if r == "free" and host not in ("", "::", "0.0.0.0", "*"):
        r = bind(host, port)
    print(p, r, flush=True)
`;
