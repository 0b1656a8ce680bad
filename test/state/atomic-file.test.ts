// Crash-safe files: atomic replacement with a fixed mode, and exclusive
// creation for evidence that must never be rewritten.
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  exists,
  readJsonIfExists,
  readOwnFile,
  readRegularFile,
  writeFileAtomic,
  writeFileExclusive,
} from "../../src/state/atomic-file.js";
import { smallDisk, type FullDisk } from "./full-disk.js";

let dir: string;
let oldUmask: number;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "narwhal-atomic-"));
  oldUmask = process.umask();
});
afterEach(async () => {
  process.umask(oldUmask);
  await rm(dir, { recursive: true, force: true });
});

const modeOf = async (f: string) => (await stat(f)).mode & 0o777;

describe("writeFileAtomic", () => {
  it("writes 0600 even under a permissive umask", async () => {
    process.umask(0o000);
    const f = path.join(dir, "state.json");
    await writeFileAtomic(f, "{}\n");
    expect(await modeOf(f)).toBe(0o600);
  });

  it("tightens the mode of a file that was world-readable before", async () => {
    process.umask(0o000);
    const f = path.join(dir, "state.json");
    await writeFile(f, "old", { mode: 0o666 });
    await writeFileAtomic(f, "new");
    expect(await modeOf(f)).toBe(0o600);
    expect(await readFile(f, "utf8")).toBe("new");
  });

  it("honours an explicit mode regardless of a restrictive umask", async () => {
    process.umask(0o077);
    const f = path.join(dir, "public.json");
    await writeFileAtomic(f, "x", 0o644);
    expect(await modeOf(f)).toBe(0o644);
  });

  it("replaces the content and leaves no temp files behind", async () => {
    const f = path.join(dir, "narwhal.json");
    await writeFileAtomic(f, "first");
    await writeFileAtomic(f, Buffer.from("second, longer content"));
    await writeFileAtomic(f, "third");
    expect(await readFile(f, "utf8")).toBe("third");
    expect(await readdir(dir)).toEqual(["narwhal.json"]);
  });

  it("fails without leaving a temp file when the target cannot be replaced", async () => {
    const target = path.join(dir, "a-directory");
    await writeFile(path.join(dir, "keep"), "");
    await mkdir(path.join(target, "child"), { recursive: true });
    await expect(writeFileAtomic(target, "x")).rejects.toThrow();
    expect((await readdir(dir)).sort()).toEqual(["a-directory", "keep"]);
  });
});

describe("writeFileExclusive", () => {
  it("creates a new file and reports true", async () => {
    const f = path.join(dir, "checked.json");
    expect(await writeFileExclusive(f, "one")).toBe(true);
    expect(await readFile(f, "utf8")).toBe("one");
  });

  it("creates evidence private (0600) by default, even under a permissive umask", async () => {
    const old = process.umask(0o000);
    try {
      const f = path.join(dir, "health.txt");
      expect(await writeFileExclusive(f, "ok")).toBe(true);
      expect(await modeOf(f)).toBe(0o600);
    } finally {
      process.umask(old);
    }
  });

  it("returns false on an existing file and never overwrites it", async () => {
    const f = path.join(dir, "checked.json");
    await writeFileExclusive(f, "original", 0o600);
    expect(await writeFileExclusive(f, "replacement")).toBe(false);
    expect(await readFile(f, "utf8")).toBe("original");
    expect(await modeOf(f)).toBe(0o600);
  });

  it("propagates errors other than EEXIST", async () => {
    await expect(writeFileExclusive(path.join(dir, "missing-dir", "f"), "x")).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("on a full disk (a real tmpfs, filled)", () => {
  let disk: FullDisk;
  beforeEach(async () => {
    disk = await smallDisk();
    await writeFile(path.join(disk.dir, "checked.json.old"), "kept");
    await disk.fill();
  });
  afterEach(async () => {
    await disk.unmount();
  });

  it("writeFileAtomic fails with ENOSPC and removes its temp file", async () => {
    await expect(writeFileAtomic(path.join(disk.dir, "narwhal.json"), "x".repeat(10_000))).rejects.toMatchObject({ code: "ENOSPC" });
    expect((await readdir(disk.dir)).sort()).toEqual(["checked.json.old", "filler"]);
  });

  it("writeFileExclusive fails with ENOSPC and removes its temp file", async () => {
    await expect(writeFileExclusive(path.join(disk.dir, "checked.json"), "x".repeat(10_000))).rejects.toMatchObject({ code: "ENOSPC" });
    expect((await readdir(disk.dir)).sort()).toEqual(["checked.json.old", "filler"]);
  });
});

describe("readJsonIfExists / exists", () => {
  it("null for a missing file, the value for a present one, a throw for a corrupt one", async () => {
    const f = path.join(dir, "x.json");
    expect(await readJsonIfExists(f)).toBeNull();
    expect(await exists(f)).toBe(false);
    await writeFile(f, '{"a":1}');
    expect(await readJsonIfExists(f)).toEqual({ a: 1 });
    expect(await exists(f)).toBe(true);
    await writeFile(f, "{");
    await expect(readJsonIfExists(f)).rejects.toThrow(SyntaxError);
  });

  it("a FIFO in a run file's place reads as empty, synchronously, and fails as JSON: the controller never waits on it", async () => {
    // readOwnFile reads on the event loop: a blocking open of a FIFO without a writer would stop everything.
    const f = path.join(dir, "launch.json");
    execFileSync("mkfifo", [f]);
    expect(readOwnFile(f)).toEqual(Buffer.alloc(0));
    await expect(readJsonIfExists(f)).rejects.toThrow(SyntaxError);
  });
});

describe("readRegularFile while the file is replaced atomically", () => {
  it("reads the old or the new bytes, never calls a replaced regular file 'not regular', however often it is renamed over", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "narwhal-regular-"));
    const file = path.join(dir, "narwhal.json");
    await writeFileAtomic(file, "0");
    let writing = true;
    const writer = (async () => {
      for (let i = 1; writing; i++) await writeFileAtomic(file, String(i));
    })();
    const seen = new Set<string>();
    try {
      for (let i = 0; i < 2000; i++) {
        const read = await readRegularFile(file);
        seen.add(read.kind);
        expect(read.kind, JSON.stringify(read)).toBe("text");
      }
    } finally {
      writing = false;
      await writer;
      await rm(dir, { recursive: true, force: true });
    }
    expect([...seen]).toEqual(["text"]);
  });
});
