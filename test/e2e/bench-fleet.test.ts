// The fleet benchmark (bench/fleet.mjs, `npm run bench`) runs and measures what it says: a smoke run at
// 10 engines, one run each, of validate, plan and status against the generated all-captured state, and
// of plan and status against a converged pair's records cloned for the 10 engines.
// Plan exiting 0 ("nothing to do") proves the generated state is what a converged controller leaves,
// so the 1000-engine numbers are of a no-op plan and a status of live engines, not of an error path.
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { REPO } from "./sim-fleet.js";

describe("bench/fleet.mjs", () => {
  it("measures validate, plan and status of a generated 10-engine fleet and writes them as JSON", async () => {
    const out = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-bench-smoke-")), "result.json");
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["bench/fleet.mjs", "--parts", "sizes", "--sizes", "10", "--runs", "1", "--json", out],
      { cwd: REPO },
    );
    type Row = { runs: number; cpu_s: number; peak_rss_mb: number; exit_codes: number[] };
    const report = JSON.parse(await fs.readFile(out, "utf8")) as {
      machine: { nproc: number };
      sizes: Record<string, Record<string, Row>>;
      sizes_converged: Record<string, { state_mb: number; proofs: number; plan: Row; status: Row }>;
    };
    expect(report.machine.nproc).toBeGreaterThan(0);
    for (const name of ["validate", "plan", "status"]) {
      const s = report.sizes["10"]![name]!;
      expect(s, name).toMatchObject({ runs: 1, exit_codes: [0] });
      expect(s.cpu_s, name).toBeGreaterThan(0);
      expect(s.peak_rss_mb, name).toBeGreaterThan(10);
    }
    // Against a real pair's records cloned in one pool of 10 (5 prefills × 5 decodes, every pair proven):
    // plan has nothing to do, so the clones are what a converged controller leaves.
    const converged = report.sizes_converged["10"]!;
    expect(converged.proofs).toBe(25);
    for (const name of ["plan", "status"] as const)
      expect(converged[name], name).toMatchObject({ runs: 1, exit_codes: [0] });
    expect(stdout).toMatch(/^validate\s+\S+ \/ \S+ \/ \d+/m);
    expect(stdout).toMatch(/^state\s+10: [\d.]+ MB, 25 proofs/m);
    await fs.rm(path.dirname(out), { recursive: true, force: true });
  });
});
