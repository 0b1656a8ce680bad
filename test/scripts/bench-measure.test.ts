// bench/measure.mjs measures a child process through bench/rusage.py: the CPU the kernel accounted to the
// reaped command, in microseconds. GNU time, used before, printed hundredths, each truncated, so a node
// start (~0.02 s) read as 0.01 and every ratio to that floor came out about twice too large.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { measureCommand, measureNode, resultFile, writeResult } from "../../bench/measure.mjs";

describe("measureCommand", () => {
  it("reads CPU finer than the hundredths GNU time printed", () => {
    const cpus = Array.from({ length: 5 }, () => measureNode(["-e", "0"]).cpu);
    for (const cpu of cpus) expect(cpu).toBeGreaterThan(0);
    // Five node starts all landing on whole hundredths at microsecond resolution: not in this universe.
    expect(
      cpus.some((c) => Math.abs(c * 100 - Math.round(c * 100)) > 1e-6),
      String(cpus),
    ).toBe(true);
  });

  it("counts what the command's own children used once it waited for them", () => {
    // A grandchild that spins until it has used 60 ms of CPU: the measure holds at least that much.
    const spin = "const t=process.cpuUsage();while(((u)=>u.user+u.system)(process.cpuUsage(t))<60000);";
    // `; :` keeps sh from exec-ing its last command (bash does): the node is its child, waited for
    const m = measureCommand("sh", ["-c", `"${process.execPath}" -e '${spin}'; :`]);
    expect(m.cpu).toBeGreaterThanOrEqual(0.06);
    expect(m.rssMb).toBeGreaterThan(10); // the node's peak, not sh's
  });

  it("passes the command's output through and its exit code on, untouched by the report", () => {
    // stderr ending without a newline: GNU time's report would have been glued onto it
    const m = measureCommand("sh", ["-c", "printf out; printf err >&2; exit 3"], { okCodes: [3] });
    expect(m).toMatchObject({ code: 3, stdout: "out", stderr: "err" });
    expect(() => measureCommand("sh", ["-c", "exit 3"])).toThrow(/sh -c exit 3 exited 3 \(expected 0\)/);
  });

  it("runs the command with SIGPIPE and SIGXFSZ at their defaults, which Python ignores for itself", () => {
    const status = measureCommand("sh", ["-c", "grep SigIgn /proc/self/status"]).stdout;
    const ignored = BigInt(`0x${/^SigIgn:\s*([0-9a-f]+)$/m.exec(status)![1]}`);
    for (const signal of [13, 25]) expect((ignored >> BigInt(signal - 1)) & 1n, `signal ${signal}`).toBe(0n);
  });

  it("refuses to run without the report's file descriptor, saying how to open it", () => {
    const r = spawnSync("python3", [path.join(import.meta.dirname, "../../bench/rusage.py"), "true"], {
      encoding: "utf8",
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("file descriptor 3 is not open: run it as `rusage.py COMMAND 3>REPORT`");
  });

  it("says how a command ended that did not exit: a signal, or no such command", () => {
    expect(measureCommand("sh", ["-c", "kill -9 $$"], { okCodes: [137] }).code).toBe(137);
    expect(() => measureCommand("/nonexistent/narwhal-bench", [])).toThrow(
      /exited 127[\s\S]*cannot run \/nonexistent\/narwhal-bench: No such file or directory/,
    );
  });
});

describe("resultFile", () => {
  it("names a day's second and third run apart from its first: nothing an earlier run wrote is overwritten", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "narwhal-bench-results-"));
    try {
      const names = [];
      for (let i = 0; i < 3; i++) {
        const file = resultFile(dir, "2026-12-07", "-plan-rollout");
        names.push(path.basename(file));
        fs.writeFileSync(file, "{}\n");
      }
      expect(names).toEqual([
        "2026-12-07-plan-rollout.json",
        "2026-12-07-2-plan-rollout.json",
        "2026-12-07-3-plan-rollout.json",
      ]);
      // the fleet's own file numbers on its own
      expect(path.basename(resultFile(dir, "2026-12-07"))).toBe("2026-12-07.json");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("writeResult", () => {
  it("writes a day's runs side by side under their default names, and overwrites only a file --json names", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "narwhal-bench-results-"));
    try {
      const report = (n: number) => ({ at: "2026-12-07T03:00:00.000Z", n });
      const first = writeResult(report(1), { dir, suffix: "-startup" });
      const second = writeResult(report(2), { dir, suffix: "-startup" });
      expect([first, second].map((f) => path.basename(f))).toEqual([
        "2026-12-07-startup.json",
        "2026-12-07-2-startup.json",
      ]);
      expect(JSON.parse(fs.readFileSync(first, "utf8"))).toEqual(report(1));
      const named = path.join(dir, "sub", "named.json");
      writeResult(report(3), { json: named, dir });
      writeResult(report(4), { json: named, dir });
      expect(JSON.parse(fs.readFileSync(named, "utf8"))).toEqual(report(4));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
