// The whole-file readers of host access, on real files: a /proc/<pid>/stat (whose size reads 0) and
// regular files longer than the first buffer, read whole, and refused past their bound.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { readProcEnviron, readProcStatSync, readWhole } from "../../src/hosts/read-whole.js";
import { parseProcStat } from "../../src/backends/proc.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "narwhal-read-whole-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const tooLarge = () => new Error("too large");

describe("readProcStatSync", () => {
  it("reads a live process's stat whole, though its size reads 0", () => {
    const stat = parseProcStat(readProcStatSync(`/proc/${process.pid}/stat`, 4096, tooLarge).toString("utf8"));
    expect(stat.pid).toBe(process.pid);
    expect(stat.startTicks).toBeGreaterThan(0);
  });

  it("reads a file longer than its first buffer whole, and refuses one past the bound", async () => {
    for (const size of [1023, 1024, 1025, 5000]) {
      const file = path.join(dir, `f${size}`);
      const text = Buffer.from("x".repeat(size - 1) + "\n");
      await writeFile(file, text);
      expect(readProcStatSync(file, 8192, tooLarge).equals(text), String(size)).toBe(true);
      expect(() => readProcStatSync(file, size - 1, tooLarge)).toThrow("too large");
      expect((await readWhole(file, 8192, tooLarge)).equals(text), String(size)).toBe(true);
    }
  });

  it("throws the open's error for a process that is gone", () => {
    expect(() => readProcStatSync("/proc/999999999/stat", 4096, tooLarge)).toThrow(/ENOENT/);
  });
});

describe("readProcEnviron", () => {
  it("reads a live process's environment whole, at the first buffer's edge and far past it, as a read to the end does", async () => {
    // One variable X of n bytes: the environment is "X=" + n bytes + NUL, so 4093 fills the first 4 KiB exactly.
    for (const n of [10, 4092, 4093, 4094, 9000, 100_000]) {
      const child = spawn("sleep", ["30"], { env: { X: "y".repeat(n) }, stdio: "ignore" });
      try {
        const file = `/proc/${child.pid}/environ`;
        const read = await readProcEnviron(file, 1 << 20, tooLarge);
        expect(read.length, String(n)).toBe(n + 3);
        expect(read.equals(readFileSync(file)), String(n)).toBe(true);
        await expect(readProcEnviron(file, n, tooLarge)).rejects.toThrow("too large");
      } finally {
        child.kill("SIGKILL");
      }
    }
  });
});
