// decodeOnlyFinding and the counters it reads, on /metrics texts captured
// from real simulator runs (test/phases/kv-metrics, test/sim/capture_kv_metrics.py).
import { describe, expect, it } from "vitest";
import { parsePrometheus } from "../../src/phases/prometheus.js";
import { decodeOnlyFinding, missingKvSeries, type KvCounters } from "../../src/phases/kv-watch.js";
import { capturedCounters, metricsText } from "./kv-fixtures.js";

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:00:10.000Z";

describe("KV counters of a real simulator's /metrics", () => {
  it("reads the prompt sources, the NIXL histograms and counters", () => {
    const fresh = capturedCounters("decode-0-fresh");
    expect(fresh).toMatchObject({ external: 0, local_compute: 0, failed_transfers: 0, bytes_transferred_count: 0 });
    const moved = capturedCounters("decode-1-after-3-transfers");
    expect(moved.external).toBeGreaterThan(0);
    expect(moved.local_compute).toBe(0);
    expect(moved.bytes_transferred_count).toBe(3);
    expect(moved.bytes_transferred_sum).toBeGreaterThan(0);
    expect(capturedCounters("prefill-after-3-expired").kv_expired_reqs).toBeGreaterThanOrEqual(3);
  });

  it("names the KV series a decode without a NIXL connector lacks (kserve #5987)", () => {
    expect(missingKvSeries(parsePrometheus(metricsText("decode-0-fresh")))).toEqual([]);
    const noConnector = metricsText("decode-0-fresh")
      .split("\n")
      .filter((l) => !l.includes("vllm:nixl_") && !l.includes("prompt_tokens_by_source"))
      .join("\n");
    expect(missingKvSeries(parsePrometheus(noConnector))).toEqual([
      "vllm:prompt_tokens_by_source_total",
      "vllm:nixl_bytes_transferred_sum",
      "vllm:nixl_bytes_transferred_count",
      "vllm:nixl_num_failed_transfers_total",
    ]);
  });
});

describe("decodeOnlyFinding between two scrapes of one decode", () => {
  const at = (c: KvCounters, t: string): KvCounters => ({ ...c, at: t });
  const fresh = at(capturedCounters("decode-0-fresh"), T0);
  const table: Array<[string, KvCounters, KvCounters, string | null]> = [
    ["no traffic", fresh, at(fresh, T1), null],
    ["three good transfers", fresh, at(capturedCounters("decode-1-after-3-transfers"), T1), null],
    [
      "three requests recomputed silently",
      fresh,
      at(capturedCounters("decode-silent-after-3-requests"), T1),
      "silent-recompute",
    ],
    // kv_load_failure_policy=recompute: every answer was 200 with the right text; only the counter tells.
    [
      "three failed transfers, recomputed",
      fresh,
      at(capturedCounters("decode-failing-after-3-requests"), T1),
      "transfer-failed",
    ],
    // The process restarted between the scrapes (counters back to zero): nothing to say about the interval.
    ["a restart between the scrapes", at(capturedCounters("decode-1-after-3-transfers"), T0), at(fresh, T1), null],
  ];
  it.each(table)("%s", (_name, prev, now, cause) => {
    const finding = decodeOnlyFinding("engine-2", prev, now);
    expect(finding?.cause ?? null).toBe(cause);
    if (finding) {
      expect(finding.message).toContain("decode engine-2");
      expect(finding.message).toContain(T0);
    }
  });

  it("says how many prompt tokens were computed locally and how many arrived", () => {
    const now = at(capturedCounters("decode-silent-after-3-requests"), T1);
    const finding = decodeOnlyFinding("engine-2", fresh, now);
    expect(finding?.message).toContain(`computed ${now.local_compute} prompt tokens locally and received 0`);
  });

  it("failures outrank recompute: a failed transfer recomputed under policy recompute is transfer-failed", () => {
    const failing = at(capturedCounters("decode-failing-after-3-requests"), T1);
    expect(failing.local_compute).toBeGreaterThan(failing.external);
    expect(decodeOnlyFinding("engine-2", fresh, failing)?.cause).toBe("transfer-failed");
  });
});
