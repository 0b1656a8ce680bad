// The fleet benchmark (bench/fleet.mjs, `npm run bench`) runs and measures what it says: a smoke run at
// 10 engines, one run each, of validate, plan and status against the generated all-captured state.
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
    const report = JSON.parse(await fs.readFile(out, "utf8")) as {
      machine: { nproc: number };
      sizes: Record<string, Record<string, { runs: number; cpu_s: number; peak_rss_mb: number; exit_codes: number[] }>>;
    };
    expect(report.machine.nproc).toBeGreaterThan(0);
    for (const name of ["validate", "plan", "status"]) {
      const s = report.sizes["10"]![name]!;
      expect(s, name).toMatchObject({ runs: 1, exit_codes: [0] });
      expect(s.cpu_s, name).toBeGreaterThan(0);
      expect(s.peak_rss_mb, name).toBeGreaterThan(10);
    }
    expect(stdout).toMatch(/^validate\s+\S+ \/ \S+ \/ \d+/m);
    await fs.rm(path.dirname(out), { recursive: true, force: true });
  });
});
