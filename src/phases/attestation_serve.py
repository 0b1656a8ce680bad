#!/usr/bin/env python3
"""Attestation sidecar for one engine (seed 001 "attestation_contract serve"; seed 003 §14).

Runs on the engine's node with the node's python3 and the standard library only (a
remote node has no narwhal install: narwhal copies this script and the run's
attestation.json there):

    python3 attestation_serve.py ATTESTATION.json

Serves the attestation's bytes, unchanged, to GET (and HEAD) on the path of its
attestation_url, bound to that URL's host and port; every other path is 404, every
other method 405. The bind follows the engine's rules: a name is resolved, and a
wildcard host binds every address of its family. It exits 0 on SIGTERM or SIGINT, and
on its own once the engine it attests is no longer the recorded process (boot id and
process start ticks, checked every WATCH_SECONDS on a timer: no busy loop), so a
sidecar never outlives its engine to vouch for a process that is gone.
"""
import http.server
import json
import signal
import socket
import sys
import threading
import urllib.parse

WATCH_SECONDS = 2.0


def fail(message):
    sys.stderr.write(f"attestation_serve: {message}\n")
    sys.exit(2)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def start_ticks(pid):
    """Field 22 of /proc/PID/stat (after the parenthesised comm), None when gone or a zombie."""
    try:
        stat = read(f"/proc/{pid}/stat").decode()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


def engine_alive(process):
    """The engine is still the recorded process: same boot, same pid, same start tick."""
    pid, ticks = process.get("pid"), process.get("start_ticks")
    if not isinstance(pid, int) or not isinstance(ticks, int):
        return True  # nothing to compare with (an engine whose start tick could not be read): served until stopped
    boot = process.get("boot_id")
    if boot and read("/proc/sys/kernel/random/boot_id").decode().strip() != boot:
        return False
    return start_ticks(pid) == ticks


def main():
    if len(sys.argv) != 2:
        fail("usage: attestation_serve.py ATTESTATION.json")
    body = read(sys.argv[1])
    try:
        attestation = json.loads(body)
        url = urllib.parse.urlsplit(attestation["attestation_url"])
        port = url.port
    except (ValueError, KeyError, TypeError) as err:
        fail(f"{sys.argv[1]} is not an attestation with an attestation_url: {err}")
    if url.scheme != "http" or not url.hostname or port is None:
        fail(f"attestation_url {attestation['attestation_url']!r} must be http://HOST:PORT/PATH")
    route = url.path or "/"
    host = url.hostname

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "narwhal-attestation/1"

        def answer(self, send_body):
            if urllib.parse.urlsplit(self.path).path != route:
                self.send_error(404, f"the attestation is served at {route}")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)

        def do_GET(self):
            self.answer(True)

        def do_HEAD(self):
            self.answer(False)

        def refuse(self):
            self.send_response(405)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = refuse

        def log_message(self, fmt, *args):
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if host not in ("0.0.0.0", "::"):
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        except OSError as err:
            fail(f"cannot resolve {host}: {err}")

    class Server(http.server.ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

        def server_bind(self):
            if host == "::":  # a wildcard binds both families, as the engine's listeners do
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            super().server_bind()

    try:
        server = Server((host, port), Handler)
    except OSError as err:
        fail(f"cannot bind {host}:{port}: {err}")
    done = threading.Event()

    def stop(*_):
        if not done.is_set():
            done.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    process = attestation.get("process") or {}

    def watch():
        while not done.wait(WATCH_SECONDS):
            if not engine_alive(process):
                sys.stderr.write(f"attestation_serve: engine pid {process.get('pid')} is gone; exiting\n")
                stop()

    threading.Thread(target=watch, daemon=True).start()
    sys.stderr.write(f"attestation_serve: serving {attestation.get('engine')} at http://{host}:{port}{route}\n")
    sys.stderr.flush()
    server.serve_forever(poll_interval=0.5)
    server.server_close()


if __name__ == "__main__":
    main()
