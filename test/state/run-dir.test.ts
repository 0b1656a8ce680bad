// Run directories appear whole with their files and modes, get distinct names
// for retries within one second, and half-built ones are cleaned up.
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createRunDir, freshName, removePartialRuns, runFileMode, runsRoot, utcStamp } from "../../src/state/run-dir.js";

const HASH = "0123456789abcdef".repeat(4);
const NOW = new Date("2025-03-04T05:06:07.891Z");

let state: string;
let oldUmask: number;
beforeEach(async () => {
  state = await mkdtemp(path.join(tmpdir(), "narwhal-runs-"));
  oldUmask = process.umask();
});
afterEach(async () => {
  process.umask(oldUmask);
  await rm(state, { recursive: true, force: true });
});

const modeOf = async (f: string) => (await stat(f)).mode & 0o777;

const files = () => [
  { name: "launch.json", data: '{"schema":"narwhal.launch/v1"}\n', mode: 0o444 },
  { name: "container.env", data: "VLLM_API_KEY=k\n", mode: 0o600 },
];

describe("createRunDir", () => {
  it("names the dir <utc-stamp>-<hash8> under runs/<engine> and writes each file as umask 077 would, whatever the process umask", async () => {
    process.umask(0o000);
    const dir = await createRunDir(state, "engine-1", HASH, [...files(), { name: "inspection.json", data: "{}", mode: 0o644 }], NOW);
    expect(dir).toBe(path.join(state, "runs", "engine-1", "20250304T050607Z-01234567"));
    expect(runsRoot(state, "engine-1")).toBe(path.dirname(dir));
    expect((await readdir(dir)).sort()).toEqual(["container.env", "inspection.json", "launch.json"]);
    expect(await readFile(path.join(dir, "launch.json"), "utf8")).toBe('{"schema":"narwhal.launch/v1"}\n');
    // seed 000 prepares under `umask 077`: no group or other bits on anything, read-only stays read-only.
    expect(await modeOf(path.join(dir, "launch.json"))).toBe(0o400);
    expect(await modeOf(path.join(dir, "inspection.json"))).toBe(0o600);
    expect(await modeOf(path.join(dir, "container.env"))).toBe(0o600);
    expect(await modeOf(dir)).toBe(0o700);
    expect(await modeOf(runsRoot(state, "engine-1"))).toBe(0o700);
    expect(runFileMode(0o755)).toBe(0o700);
    // Only the final directory remains: the hidden .partial one was renamed.
    expect(await readdir(runsRoot(state, "engine-1"))).toEqual([path.basename(dir)]);
  });

  it("gives a second run in the same second a distinct name and leaves the first untouched", async () => {
    const first = await createRunDir(state, "engine-1", HASH, files(), NOW);
    const second = await createRunDir(state, "engine-1", HASH, [{ name: "launch.json", data: "second", mode: 0o444 }], NOW);
    const third = await createRunDir(state, "engine-1", HASH, [{ name: "launch.json", data: "third", mode: 0o444 }], NOW);
    expect(path.basename(second)).toBe("20250304T050607Z-01234567-2");
    expect(path.basename(third)).toBe("20250304T050607Z-01234567-3");
    expect(await readFile(path.join(first, "launch.json"), "utf8")).toContain("narwhal.launch/v1");
    expect(await readFile(path.join(second, "launch.json"), "utf8")).toBe("second");
  });

  it("replaces a stale .partial dir of the same name rather than mixing files into it", async () => {
    const root = runsRoot(state, "engine-1");
    const partial = path.join(root, ".20250304T050607Z-01234567.partial");
    await mkdir(partial, { recursive: true });
    await writeFile(path.join(partial, "leftover"), "x");
    const dir = await createRunDir(state, "engine-1", HASH, files(), NOW);
    expect((await readdir(dir)).sort()).toEqual(["container.env", "launch.json"]);
  });

  it("refuses duplicate file names in one run", async () => {
    const dup = [files()[0]!, { ...files()[0]!, data: "again" }];
    await expect(createRunDir(state, "engine-1", HASH, dup, NOW)).rejects.toMatchObject({ code: "EEXIST" });
  });

  it("stamps in UTC, to the second", () => {
    expect(utcStamp(new Date("2025-12-31T23:59:59.999Z"))).toBe("20251231T235959Z");
  });
});

describe("freshName", () => {
  it("gives health.txt, then health.2.txt, health.3.txt ...", async () => {
    const dir = await mkdtemp(path.join(state, "cap-"));
    expect(await freshName(dir, "health.txt")).toBe("health.txt");
    await writeFile(path.join(dir, "health.txt"), "");
    expect(await freshName(dir, "health.txt")).toBe("health.2.txt");
    await writeFile(path.join(dir, "health.2.txt"), "");
    expect(await freshName(dir, "health.txt")).toBe("health.3.txt");
  });

  it("handles names without an extension", async () => {
    const dir = await mkdtemp(path.join(state, "cap-"));
    await writeFile(path.join(dir, "container.id"), "");
    await writeFile(path.join(dir, "LOG"), "");
    expect(await freshName(dir, "container.id")).toBe("container.2.id");
    expect(await freshName(dir, "LOG")).toBe("LOG.2");
  });
});

describe("removePartialRuns", () => {
  it("removes only hidden .partial dirs", async () => {
    const root = runsRoot(state, "engine-1");
    const done = await createRunDir(state, "engine-1", HASH, files(), NOW);
    await mkdir(path.join(root, ".20250304T050608Z-01234567.partial"));
    await writeFile(path.join(root, ".20250304T050608Z-01234567.partial", "launch.json"), "{}");
    await mkdir(path.join(root, "20250304T050609Z-01234567.partial")); // not hidden: not ours to remove
    await mkdir(path.join(root, ".keep"));
    await removePartialRuns(state, "engine-1");
    expect((await readdir(root)).sort()).toEqual([".keep", "20250304T050609Z-01234567.partial", path.basename(done)].sort());
  });

  it("does nothing for an engine without runs", async () => {
    await expect(removePartialRuns(state, "engine-9")).resolves.toBeUndefined();
  });
});
