#!/usr/bin/python3
"""Capture real simulator /metrics texts for the KV unit tables (test/phases/kv-*.test.ts).

    /usr/bin/python3 test/sim/capture_kv_metrics.py test/phases/kv-metrics

A prefill and a decode as nixl_smoke.py starts them; each file is one decode's (or the prefill's)
/metrics after a named history of router-style traffic, so the tables read counters the
simulator really produced rather than hand-written ones. Re-run it when the metrics change.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nixl_smoke import complete, prefill, snapshot, start, wait_for  # noqa: E402 - the sibling test's engine helpers
from smoke import cleanup  # noqa: E402


def main(out):
    os.makedirs(out, exist_ok=True)

    def save(name, engine):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(engine.get("/metrics")[1])

    p = start("kv_producer", VLLM_NIXL_ABORT_REQUEST_TIMEOUT=1)
    d = start("kv_consumer", policy="recompute")
    save("decode-0-fresh.txt", d)
    for _ in range(3):
        complete(d, 12, prefill(p))
    save("decode-1-after-3-transfers.txt", d)
    silent = start("kv_consumer", faults="kv_silent_recompute")
    for _ in range(3):
        complete(silent, 12, prefill(p))
    save("decode-silent-after-3-requests.txt", silent)
    failing = start("kv_consumer", policy="recompute", faults="kv_transfer_fail")
    for _ in range(3):
        complete(failing, 12, prefill(p))
    save("decode-failing-after-3-requests.txt", failing)
    save("prefill-after-9-prefills.txt", p)
    # The 3 prefills the silent decode never read expire after VLLM_NIXL_ABORT_REQUEST_TIMEOUT=1.
    if not wait_for(lambda: snapshot(p)["expired"] >= 3):
        sys.exit("the unread prefills did not expire")
    save("prefill-after-3-expired.txt", p)
    print(f"captured into {out}")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    finally:
        cleanup()
