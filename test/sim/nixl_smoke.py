#!/usr/bin/python3
"""Two-engine NIXL smoke test for the simulator (stdlib only).

    /usr/bin/python3 test/sim/nixl_smoke.py

A prefill and a decode simulator on 127.0.0.1 (kernel-chosen ports): the prefill request with
``do_remote_decode`` returns vLLM's kv_transfer_params, the decode request carrying them pulls the
blocks over the prefill's side channel, and its text equals a local computation of the same prompt.
Then every KV fault switch, each checked by its effect on output, HTTP status and metrics.
Exits non-zero on the first failed expectation.
"""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smoke import Engine, cleanup, expect  # noqa: E402 - the sibling smoke test's process helpers

PROMPT = "The harbor lights came on one by one while the whales sang far below the cold north water"
LOOPBACK = {"VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1"}


def kv_config(role, policy="fail", **extra):
    return ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": role,
                                                "kv_load_failure_policy": policy, **extra})]


def start(role, policy="fail", faults="", kv_extra=None, tp=1, **environ):
    environ = dict(LOOPBACK, **environ)
    if faults:
        environ["NARWHAL_SIM_FAULTS"] = faults
    engine = Engine(tp=tp, nixl=False, extra=kv_config(role, policy, **(kv_extra or {})), **environ)
    expect(engine.ready(), f"{role} {policy} {faults or 'no faults'} ready")
    return engine


def complete(engine, max_tokens, params=None):
    body = {"model": "tiny", "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0}
    if params is not None:
        body["kv_transfer_params"] = params
    status, text = engine.get("/v1/completions", body=body)
    return status, json.loads(text)


def prefill(engine):
    status, body = complete(engine, 1, {"do_remote_decode": True, "do_remote_prefill": False})
    expect(status == 200 and body["kv_transfer_params"], "prefill returns kv_transfer_params")
    return body["kv_transfer_params"]


def metric(engine, name, **labels):
    """Sum of the samples of NAME whose labels include LABELS."""
    total = 0.0
    for line in engine.get("/metrics")[1].splitlines():
        match = re.match(r"^([^{ ]+)(?:\{([^}]*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(3))
    return total


def snapshot(engine):
    return {"external": metric(engine, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer"),
            "local": metric(engine, "vllm:prompt_tokens_by_source_total", source="local_compute"),
            "cache_hit": metric(engine, "vllm:prompt_tokens_by_source_total", source="local_cache_hit"),
            "xfers": metric(engine, "vllm:nixl_bytes_transferred_count"),
            "bytes": metric(engine, "vllm:nixl_bytes_transferred_sum"),
            "xfer_time": metric(engine, "vllm:nixl_xfer_time_seconds_count"),
            "failed": metric(engine, "vllm:nixl_num_failed_transfers_total"),
            "expired": metric(engine, "vllm:nixl_num_kv_expired_reqs_total")}


def delta(before, after):
    return {k: after[k] - before[k] for k in before}


def measured(engine, params):
    """A decode request with PARAMS: its status, body and how the engine's metrics moved."""
    before = snapshot(engine)
    status, body = complete(engine, 12, params)
    return status, body, delta(before, snapshot(engine))


def wait_for(predicate, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def happy_path(reference):
    print("nixl: prefill -> decode over the side channel")
    p, d = start("kv_producer"), start("kv_consumer")
    _, local = complete(d, 12)
    expect(local["kv_transfer_params"] is None and reference == local["choices"][0]["text"],
           "a plain request is computed locally and is the same on every engine")
    tokens = local["usage"]["prompt_tokens"]
    params = prefill(p)
    expect(set(params) >= {"do_remote_prefill", "do_remote_decode", "remote_block_ids", "remote_engine_id",
                           "remote_request_id", "remote_host", "remote_port", "tp_size"}
           and params["do_remote_prefill"] is True and params["do_remote_decode"] is False
           and params["remote_host"] == "127.0.0.1" and params["remote_port"] == p.side
           and len(params["remote_block_ids"]) == -(-tokens // 16), "kv_transfer_params carry vLLM's fields")
    p0, d0 = snapshot(p), snapshot(d)
    status, body = complete(d, 12, params)
    dd, pd = delta(d0, snapshot(d)), delta(p0, snapshot(p))
    expect(status == 200 and body["choices"][0]["text"] == reference, "decode output equals the local computation")
    expect(dd["external"] == tokens and dd["local"] == 0 and dd["cache_hit"] == 0,
           "decode counts the prompt as external_kv_transfer")
    expect(dd["xfers"] == 1 and dd["xfer_time"] == 1 and dd["bytes"] > 0 and dd["failed"] == 0,
           "decode observed one transfer, no failure")
    expect(pd == dict.fromkeys(pd, 0.0), "prefill metrics unchanged by the pull (its prompt was counted local)")
    expect(snapshot(p)["local"] == tokens, "prefill counted its prompt as local_compute")
    with socket.create_connection(("127.0.0.1", p.side), timeout=2) as sock:
        advertised = json.loads(sock.makefile().readline())["compatibility_hash"]
    expect(f"NIXL compatibility check passed (hash: {advertised})" in d.output(),
           "decode logs vLLM's compatibility line with the prefill's hash")
    status, _ = complete(d, 12, prefill(p))
    expect(status == 200 and d.output().count("NIXL compatibility check passed") == 1,
           "the handshake is cached per remote engine")
    status, again = complete(d, 12, params)
    expect(status == 200 and again["choices"][0]["text"] != reference and delta(d0, snapshot(d))["failed"] == 0
           and "Potentially invalid KV blocks for unrecognized request" in p.output(),
           "pulling consumed blocks again reads freed memory: wrong text, no failure counted")
    return p, d, tokens


def fault_tests(p, d, reference, tokens):
    print("nixl: kv_transfer_fail")
    f = start("kv_consumer", faults="kv_transfer_fail")
    status, _, after = measured(f, prefill(p))
    expect(status == 500 and after["failed"] == 1 and after["external"] == 0 and after["xfers"] == 0,
           "policy fail: HTTP 500, one failed transfer counted")
    expect("NIXL transfer failure: transfer_failed. Marking blocks as invalid" in f.output(), "failure logged")
    r = start("kv_consumer", policy="recompute", faults="kv_transfer_fail")
    status, body, after = measured(r, prefill(p))
    expect(status == 200 and body["choices"][0]["text"] == reference and after["failed"] == 1
           and after["local"] == tokens and after["external"] == 0,
           "policy recompute: local prefill, right text, the failure still counted")

    print("nixl: NARWHAL_SIM_FAULTS_FILE (switches turned on and off in a running engine)")
    switches = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"nixl-smoke-faults-{os.getpid()}")
    try:
        live = start("kv_consumer", NARWHAL_SIM_FAULTS_FILE=switches)
        expect(complete(live, 12, prefill(p))[0] == 200, "no fault file: the pull works")
        with open(switches, "w", encoding="utf-8") as f:
            f.write("kv_transfer_fail\n")
        status, _, after = measured(live, prefill(p))
        expect(status == 500 and after["failed"] == 1, "the switch written to the file applies to the next request")
        os.unlink(switches)
        expect(complete(live, 12, prefill(p))[0] == 200, "the file removed: the pull works again")
    finally:
        if os.path.exists(switches):
            os.unlink(switches)

    print("nixl: kv_handshake_refuse")
    bad = start("kv_producer", faults="kv_handshake_refuse")
    status, _, after = measured(d, prefill(bad))
    expect(status == 500 and after["external"] == 0 and after["failed"] == 0 and after["xfers"] == 0,
           "incompatible prefill: the decode refuses the handshake (500 under fail, no transfer)")
    expect("NIXL compatibility hash mismatch. Local: " in d.output()
           and "NIXL transfer failure: handshake_failed" in d.output(), "the mismatch is logged in vLLM's words")

    print("nixl: heterogeneous TP (vLLM 0.11: the decode's TP a multiple of the prefill's)")
    p2, d4 = start("kv_producer", tp=2), start("kv_consumer", tp=4)
    status, body, after = measured(d4, prefill(p2))
    expect(status == 200 and body["choices"][0]["text"] == reference and after["external"] == tokens,
           "a TP-2 prefill and a TP-4 decode share one hash: the KV moves, the text is the local one")
    p4, d2 = start("kv_producer", tp=4), start("kv_consumer", tp=2)
    status, _, after = measured(d2, prefill(p4))
    expect(status == 500 and after["external"] == 0 and after["xfers"] == 0
           and "AssertionError: 2 is not divisible by 4" in d2.output(),
           "a prefill of larger TP than its decode: the handshake refuses it, as vLLM 0.11 does")

    print("nixl: kv_silent_recompute + VLLM_NIXL_ABORT_REQUEST_TIMEOUT")
    short = start("kv_producer", VLLM_NIXL_ABORT_REQUEST_TIMEOUT=1)
    s = start("kv_consumer", faults="kv_silent_recompute")
    status, body, after = measured(s, prefill(short))
    expect(status == 200 and body["choices"][0]["text"] == reference and after["external"] == 0
           and after["local"] == tokens and after["failed"] == 0 and after["xfers"] == 0,
           "silent decode-only: right text, local_compute grows, nothing counted as failed")
    expect(wait_for(lambda: snapshot(short)["expired"] == 1), "the unpulled blocks expire on the prefill")
    expect("Releasing expired KV blocks for request" in short.output(), "expiry logged in vLLM's words")

    print("nixl: kv_corrupt_blocks")
    c = start("kv_consumer", faults="kv_corrupt_blocks")
    status, body, after = measured(c, prefill(p))
    expect(status == 200 and body["choices"][0]["text"] != reference and after["external"] == tokens
           and after["xfers"] == 1 and after["failed"] == 0, "corrupted blocks: HTTP 200, wrong text, no failure")
    sender = start("kv_producer", faults="kv_corrupt_blocks")
    status, body, after = measured(d, prefill(sender))
    expect(status == 200 and body["choices"][0]["text"] != reference and after["external"] == tokens
           and after["failed"] == 0, "blocks corrupted by the prefill: the same, seen from a healthy decode")


def restart_tests(reference):
    print("nixl: prefill restarts")
    fixed = {"engine_id": "prefill-fixed-id"}
    p = start("kv_producer", kv_extra=fixed)
    d, stale = start("kv_consumer"), start("kv_consumer", faults="kv_stale_peer_metadata")
    for engine in (d, stale):
        expect(complete(engine, 12, prefill(p))[0] == 200, "pull before the restart")
    port, side = p.port, p.side
    expect(p.stop() == 0, "prefill stopped")
    p = Engine(tp=1, nixl=False, extra=kv_config("kv_producer", **fixed), port=port, side=side, **LOOPBACK)
    expect(p.ready(), "prefill restarted on the same addresses with the same engine_id")
    status, _, after = measured(d, prefill(p))
    expect(status == 500 and after["failed"] == 1,
           "same engine_id: the decode keeps the old agent metadata and its pull fails (vLLM #49238)")
    expect(p.stop() == 0, "prefill stopped again")
    p = Engine(tp=1, nixl=False, extra=kv_config("kv_producer"), port=port, side=side, **LOOPBACK)
    expect(p.ready(), "prefill restarted with a fresh engine_id")
    status, body = complete(d, 12, prefill(p))
    expect(status == 200 and body["choices"][0]["text"] == reference, "new engine_id: a new handshake, pull works")
    status, _, after = measured(stale, prefill(p))
    expect(status == 500 and after["failed"] == 1,
           "kv_stale_peer_metadata: the decode keeps the old handshake for the address, the pull fails")


def main():
    probe = start("kv_both")
    reference = complete(probe, 12)[1]["choices"][0]["text"]
    probe.stop()
    p, d, tokens = happy_path(reference)
    fault_tests(p, d, reference, tokens)
    restart_tests(reference)
    print("nixl smoke: all passed")


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
