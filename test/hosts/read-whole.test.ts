// The whole-file readers of host access, on real files: a /proc/<pid>/stat (whose size reads 0) and
// regular files longer than the first buffer, read whole, and refused past their bound.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readProcStatSync, readWhole } from "../../src/hosts/read-whole.js";
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
