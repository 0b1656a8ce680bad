// Watch mode's metrics without a controller process: a run's own registry fed
// through the observer interface and read from fixture records, served on a
// kernel-chosen loopback port, and read back with the strict exposition parser
// (which must itself reject malformed text, or the e2e scrape proves nothing).
import { afterEach, describe, expect, it } from "vitest";
import { ControllerMetrics } from "../../src/metrics/controller-metrics.js";
import { serveMetrics, type MetricsServer } from "../../src/metrics/server.js";
import { metricsAddressOption, parseListenAddress } from "../../src/metrics/address.js";
import { NarwhalError } from "../../src/errors.js";
import { record } from "../controller/records.js";
import { parseExposition, sampleValue } from "./prom-text.js";

const condition = (type: string, status: "True" | "False") => ({
  type,
  status,
  reason: "R",
  message: "m",
  lastTransitionTime: "2025-01-01T00:00:00.000Z",
});

describe("ControllerMetrics", () => {
  it("counts engines by phase and condition at scrape time, and what the observer was told", async () => {
    const m = new ControllerMetrics(30_000);
    const records = [
      record("engine-1", { conditions: [condition("Ready", "True")] }),
      record("engine-2", { phase: "failed", conditions: [condition("Ready", "False")] }),
    ];
    m.watch({ records: () => records, queueDepth: () => ({ pending: 3, running: 1, delayed: 2 }) });
    m.transition("engine-1", "probed", "captured");
    m.transition("engine-2", "probed", "captured");
    m.step("engine-1", { kind: "begin", step: "start" });
    m.step("engine-1", { kind: "wait", step: "start", wait: { awaiting: "/health to answer 200", limitMs: 60_000 } });
    m.step("engine-1", { kind: "end", step: "start", seconds: 1.5 });
    m.step("engine-2", { kind: "end", step: "check", seconds: 0.2, failure: { reason: "PhaseError" } });
    // A proof's end is the proofs counter's (kvProof below), not a step's duration.
    m.step("engine-2", { kind: "end", step: "kv-proof", seconds: 3, failure: { reason: "no-transfer" } });
    m.kvProof("passed");
    m.kvProof("no-transfer");
    m.reconciled("fleet", 0.01, true);
    m.stateWritten(0.002, true);
    const f = parseExposition(await m.registry.metrics());
    expect(sampleValue(f, "narwhal_engines", { phase: "captured" })).toBe(1);
    expect(sampleValue(f, "narwhal_engines", { phase: "failed" })).toBe(1);
    expect(sampleValue(f, "narwhal_engines", { phase: "pending" })).toBe(0); // every phase, even empty
    expect(sampleValue(f, "narwhal_engine_conditions", { type: "Ready", status: "False" })).toBe(1);
    expect(sampleValue(f, "narwhal_work_queue_depth", { state: "delayed" })).toBe(2);
    expect(sampleValue(f, "narwhal_transitions_total", { from: "probed", to: "captured" })).toBe(2);
    expect(sampleValue(f, "narwhal_step_duration_seconds_count", { step: "start", result: "ok" })).toBe(1);
    expect(sampleValue(f, "narwhal_step_duration_seconds_bucket", { step: "start", result: "ok", le: "1" })).toBe(0);
    expect(sampleValue(f, "narwhal_step_duration_seconds_bucket", { step: "start", result: "ok", le: "2.5" })).toBe(1);
    expect(sampleValue(f, "narwhal_step_failures_total", { step: "check", reason: "PhaseError" })).toBe(1);
    expect(
      sampleValue(f, "narwhal_step_duration_seconds_count", { step: "kv-proof", result: "failed" }),
    ).toBeUndefined();
    expect(sampleValue(f, "narwhal_kv_proofs_total", { result: "no-transfer" })).toBe(1);
    expect(sampleValue(f, "narwhal_reconcile_duration_seconds_count", { kind: "fleet", result: "ok" })).toBe(1);
    expect(sampleValue(f, "narwhal_state_write_duration_seconds_count", { result: "ok" })).toBe(1);
    // A condition that went away is not counted any more: the gauge is rebuilt at each scrape.
    records[1]!.conditions = [];
    const g = parseExposition(await m.registry.metrics());
    expect(sampleValue(g, "narwhal_engine_conditions", { type: "Ready", status: "False" })).toBeUndefined();
  });

  it("keeps each run's counters its own (no global registry)", async () => {
    const a = new ControllerMetrics(30_000);
    const b = new ControllerMetrics(30_000);
    a.transition("e", "pending", "inspected");
    const fb = parseExposition(await b.registry.metrics());
    expect(sampleValue(fb, "narwhal_transitions_total", { from: "pending", to: "inspected" })).toBeUndefined();
  });

  it("is alive while the loop last ended within the limit, and says why it is not", () => {
    let now = 1_000_000;
    const m = new ControllerMetrics(30_000, () => now);
    expect(m.liveness()).toMatchObject({ alive: true, why: expect.stringContaining("starting") as unknown });
    now += 31_000;
    expect(m.liveness()).toMatchObject({ alive: false, why: expect.stringContaining("no reconcile loop") as unknown });
    m.reconciled("fleet", 0.1, false);
    expect(m.liveness()).toMatchObject({ alive: true, why: expect.stringContaining("failed") as unknown });
    m.reconciled("engine", 0.1, true); // an engine's run is not the loop
    now += 45_000;
    expect(m.liveness()).toEqual({
      alive: false,
      why: "the last reconcile loop failed (retried with backoff) 45 s ago, over the limit of 30 s",
    });
  });
});

describe("the metrics endpoint", () => {
  let server: MetricsServer | undefined;
  afterEach(async () => server?.close());

  it("serves /metrics and /healthz on loopback, 503 with the reason once the loop is stale", async () => {
    let now = Date.now();
    const m = new ControllerMetrics(1_000, () => now);
    server = await serveMetrics(m, parseListenAddress("0"));
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const metrics = await fetch(`${server.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get("content-type")).toContain("text/plain");
    expect(sampleValue(parseExposition(await metrics.text()), "narwhal_engines", { phase: "captured" })).toBe(0);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    now += 5_000;
    const stale = await fetch(`${server.url}/healthz`);
    expect(stale.status).toBe(503);
    expect(await stale.text()).toMatch(/^unhealthy: no reconcile loop has ended in the 5 s since start/);
    expect((await fetch(`${server.url}/nope`)).status).toBe(404);
  });

  it("names the address and the fix when the port is taken", async () => {
    const m = new ControllerMetrics(1_000);
    server = await serveMetrics(m, parseListenAddress("127.0.0.1:0"));
    const port = new URL(server.url).port;
    const taken = serveMetrics(m, parseListenAddress(`127.0.0.1:${port}`));
    await expect(taken).rejects.toThrow(`cannot serve metrics on 127.0.0.1:${port}: EADDRINUSE`);
    await expect(taken).rejects.toMatchObject({ input: expect.stringContaining("--metrics-address") as unknown });
  });
});

describe("--metrics-address", () => {
  it("takes HOST:PORT, [IPV6]:PORT, and a bare port on loopback", () => {
    expect(parseListenAddress("9464")).toEqual({ host: "127.0.0.1", port: 9464 });
    expect(parseListenAddress(":9464")).toEqual({ host: "127.0.0.1", port: 9464 });
    expect(parseListenAddress("0.0.0.0:9464")).toEqual({ host: "0.0.0.0", port: 9464 });
    expect(parseListenAddress("[::1]:9464")).toEqual({ host: "::1", port: 9464 });
    expect(parseListenAddress("metrics.local:80")).toEqual({ host: "metrics.local", port: 80 });
    for (const bad of ["", "host", "1.2.3.4:", "1.2.3.4:99999", "::1:9464", "a:b:9464"])
      expect(() => parseListenAddress(bad), bad).toThrow(NarwhalError);
  });

  it("is a usage error with --once, or when malformed, before anything is read", () => {
    expect(() => metricsAddressOption({ once: true, metricsAddress: "9464" })).toThrow(/watch mode only/);
    expect(() => metricsAddressOption({ metricsAddress: "nine" })).toThrow(/is not HOST:PORT or PORT/);
    expect(metricsAddressOption({ once: true })).toBeUndefined();
    expect(metricsAddressOption({ metricsAddress: "9464" })).toBe("9464");
  });
});

describe("the exposition parser", () => {
  const ok = '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 3\n';
  it("reads well-formed text and rejects malformed text", () => {
    expect(sampleValue(parseExposition(ok), "a_total", { x: "1" })).toBe(3);
    for (const bad of [
      ok.slice(0, -1), // no final newline
      "a_total 3\n", // no TYPE first
      ok + "a_total{x=1} 3\n", // unquoted label value
      ok + 'a_total{x="1"} three\n', // not a number
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', // not cumulative
      '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n', // no +Inf
    ])
      expect(() => parseExposition(bad), bad).toThrow();
  });
});
