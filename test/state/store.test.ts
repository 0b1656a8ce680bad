// The lowdb state file: created on open, persisted on update, history capped,
// corrupt files moved aside (never silently reset), always 0600.
import { spawnSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readState, STATE_VERSION, stateFilePath } from "../../src/state/store.js";
import { journalPath } from "../../src/state/state-journal.js";
import { record } from "../controller/records.js";
import { openStores } from "./open-stores.js";
import { smallDisk, type FullDisk } from "./full-disk.js";

const stores = openStores();
let root: string;
let state: string;
let oldUmask: number;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "narwhal-store-"));
  state = path.join(root, "state");
  oldUmask = process.umask();
});
afterEach(async () => {
  process.umask(oldUmask);
  await stores.closeAll();
  await rm(root, { recursive: true, force: true });
});

/** What is persisted, read as another process reads it (narwhal.json and the journal after it). */
const onDisk = () => readState(state);

describe("StateStore", () => {
  it("open creates the state dir (0700) with an empty state", async () => {
    const store = await stores.open(state);
    expect((await stat(state)).mode & 0o777).toBe(0o700);
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
    expect(store.movedAside).toBeNull();
  });

  it("update persists the record, flush writes 0600 even under umask 000, and a reopen reads it back", async () => {
    process.umask(0o000);
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1", { phase: "checked" }));
    expect((await stat(journalPath(state))).mode & 0o777).toBe(0o600);
    expect((await onDisk()).engines["engine-1"]).toMatchObject({ engine: "engine-1", phase: "checked" });
    const again = await stores.open(state);
    expect(again.engine("engine-1")?.phase).toBe("checked");
    expect(again.engine("engine-1")?.updated_at).not.toBe("2025-01-01T00:00:00.000Z");
    expect((await stat(stateFilePath(state))).mode & 0o777).toBe(0o600); // the open folded the journal in
  });

  it("update passes the previous record and null deletes it", async () => {
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1", { attempts: 1 }));
    await store.update("engine-1", (prev) => ({ ...prev!, attempts: prev!.attempts + 1 }));
    expect((await onDisk()).engines["engine-1"]).toMatchObject({ attempts: 2 });
    await store.update("engine-1", () => null);
    expect((await onDisk()).engines).toEqual({});
  });

  it("caps the history at the 50 newest entries", async () => {
    const store = await stores.open(state);
    const history = Array.from({ length: 120 }, (_, i) => ({ at: `t${i}`, from: "a", to: "b", note: String(i) }));
    await store.update("engine-1", () => record("engine-1", { history }));
    const saved = (await onDisk()).engines["engine-1"] as { history: Array<{ note: string }> };
    expect(saved.history).toHaveLength(50);
    expect(saved.history[0]!.note).toBe("70");
    expect(saved.history.at(-1)!.note).toBe("119");
  });

  it("concurrent updates all land (writes are chained)", async () => {
    const store = await stores.open(state);
    await Promise.all(Array.from({ length: 10 }, (_, i) => store.update(`engine-${i}`, () => record(`engine-${i}`))));
    expect(Object.keys((await onDisk()).engines)).toHaveLength(10);
    expect((await readdir(state)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("moves a corrupt state file aside instead of silently resetting it", async () => {
    await stores.open(state);
    await writeFile(stateFilePath(state), '{"version": 1, "engines": {"engine-1": ');
    const store = await stores.open(state);
    expect(store.movedAside).toMatch(/narwhal\.json\.corrupt-\d{4}-\d{2}-\d{2}T\d{9}Z$/);
    const names = await readdir(state);
    expect(names.filter((n) => n.startsWith("narwhal.json.corrupt-"))).toHaveLength(1);
    expect(await readFile(store.movedAside!, "utf8")).toBe('{"version": 1, "engines": {"engine-1": ');
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
  });

  it.each(["null", "[]", "{}", '{"version": 1}', '"text"'])("treats %s (valid JSON, not a state file) as corrupt", async (text) => {
    await stores.open(state);
    await writeFile(stateFilePath(state), text);
    const store = await stores.open(state);
    expect(store.movedAside).not.toBeNull();
    expect(await readFile(store.movedAside!, "utf8")).toBe(text);
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
  });

  it("an IO error reading the state file is reported, not treated as corruption", async () => {
    await stores.open(state);
    // /proc/self/mem is a regular file whose first page cannot be read: EIO, as a failing disk gives.
    await rm(stateFilePath(state), { force: true });
    await symlink("/proc/self/mem", stateFilePath(state));
    await expect(stores.open(state)).rejects.toMatchObject({ code: "EIO" });
    expect((await readdir(state)).filter((n) => n.includes("corrupt") || n.includes("refused"))).toEqual([]);
  });

  it("refuses a state file of another version, and leaves it in place", async () => {
    await stores.open(state);
    await writeFile(stateFilePath(state), JSON.stringify({ version: 99, engines: {} }));
    await expect(stores.open(state)).rejects.toMatchObject({ name: "StateFileError", kind: "unsupported", message: expect.stringMatching(/version 99/) });
    expect(await readdir(state)).toEqual(["narwhal.json"]);
  });
});

/** Make narwhal.json something other than a state file; returns what to expect of the moved-aside path. */
const notAFile = {
  FIFO: async (f: string) => (spawnSync("mkfifo", [f]), (p: string) => lstat(p).then((s) => s.isFIFO())),
  directory: async (f: string) => (await mkdir(f), (p: string) => lstat(p).then((s) => s.isDirectory())),
  "symlink to /dev/zero": async (f: string) => (await symlink("/dev/zero", f), (p: string) => readlink(p).then((t) => t === "/dev/zero")),
} as const;

describe("a state file that is not what it seems", () => {
  it.each(Object.keys(notAFile) as Array<keyof typeof notAFile>)("a %s is moved aside as refused, at once, and the state rebuilt", async (kind) => {
    await stores.open(state);
    await rm(stateFilePath(state), { force: true });
    const isTheSame = await notAFile[kind](stateFilePath(state));
    const store = await stores.open(state);
    expect(store.movedAside).toMatch(/narwhal\.json\.refused-\d{4}-\d{2}-\d{2}T\d{9}Z$/);
    expect(store.asideReason).toContain(`is ${kind === "FIFO" ? "a FIFO" : kind === "directory" ? "a directory" : "a character device"}, not a regular file`);
    expect(await isTheSame(store.movedAside!)).toBe(true); // the thing itself was moved, not what it points to
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
    await store.update("engine-1", () => record("engine-1"));
    await store.close();
    expect((await lstat(stateFilePath(state))).isFile()).toBe(true);
  }, 5_000);

  it.each(Object.keys(notAFile) as Array<keyof typeof notAFile>)("status (readState) refuses a %s with a StateFileError, at once, touching nothing", async (kind) => {
    await mkdir(state);
    await notAFile[kind](stateFilePath(state));
    await expect(readState(state)).rejects.toMatchObject({ name: "StateFileError", kind: "refused", step: "state", input: stateFilePath(state) });
    expect(await readdir(state)).toEqual(["narwhal.json"]);
  }, 5_000);

  const badRecords: Array<[string, (r: Record<string, unknown>) => unknown]> = [
    ["null", () => null],
    ["a string", () => "engine-1"],
    ["missing its phase", ({ phase: _, ...rest }) => rest],
    ["with conditions null", (r) => ({ ...r, conditions: null })],
    ["with a handle without a pid", (r) => ({ ...r, handle: { kind: "native", launch_token: "t" } })],
    ["under another engine's key", (r) => ({ ...r, engine: "engine-2" })],
  ];

  it.each(badRecords)("valid JSON with an engine record %s is set aside as corrupt", async (_, bad) => {
    const good = record("engine-3") as unknown as Record<string, unknown>;
    const text = JSON.stringify({ version: 1, engines: { "engine-1": bad(record("engine-1") as unknown as Record<string, unknown>), "engine-3": good } });
    await mkdir(state);
    await writeFile(stateFilePath(state), text);
    await expect(readState(state)).rejects.toMatchObject({ name: "StateFileError", kind: "corrupt", message: expect.stringContaining('$.engines["engine-1"]') });
    const store = await stores.open(state);
    expect(store.movedAside).toMatch(/narwhal\.json\.corrupt-/);
    expect(await readFile(store.movedAside!, "utf8")).toBe(text);
    expect(store.data.engines).toEqual({});
  });

  it("a record with null optional parts (no handle yet, no layout, no error) is a valid record", async () => {
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1", { handle: null, layout: null, running_hash: null, snapshot: null }));
    expect((await stores.open(state)).movedAside).toBeNull();
    expect(Object.keys((await readState(state)).engines)).toEqual(["engine-1"]);
  });

  it("records with today's conditions and with conditions written before lastTransitionTime (`at`) are both valid", async () => {
    const store = await stores.open(state);
    const now = { type: "Ready", status: "True" as const, reason: "Captured", message: "serving", lastTransitionTime: "2026-01-01T00:00:00.000Z" };
    const old = { type: "Failed", status: "False", reason: "Terminal", message: "x", at: "2025-01-01T00:00:00.000Z" };
    await store.update("engine-1", () => record("engine-1", { conditions: [now] }));
    await store.update("engine-2", () => record("engine-2", { conditions: [old as never] }));
    expect((await stores.open(state)).movedAside).toBeNull();
    expect(Object.keys((await readState(state)).engines).sort()).toEqual(["engine-1", "engine-2"]);
  });
});

describe("temp files of failed and killed writes", () => {
  let disk: FullDisk;
  beforeEach(async () => {
    disk = await smallDisk();
  });
  afterEach(async () => {
    await disk.unmount();
  });
  const temps = async (dir: string) => (await readdir(dir)).filter((n) => n.endsWith(".tmp"));

  it("a state write on a full disk fails with ENOSPC and leaves no temp file, however many times it is tried", async () => {
    const dir = path.join(disk.dir, "state");
    const store = await stores.open(dir);
    await store.update("engine-1", () => record("engine-1"));
    await store.close(); // narwhal.json written whole, the journal folded in
    const before = await readFile(stateFilePath(dir), "utf8");
    await store.update("engine-1", (prev) => ({ ...prev!, attempts: 1 })); // a journal with one whole line
    const journalBefore = await readFile(journalPath(dir), "utf8");
    await disk.fill();
    // Larger than what is left of the journal's last page: the append itself meets the full disk.
    const history = Array.from({ length: 50 }, (_, i) => ({ at: `t${i}`, from: "a", to: "b", note: "n".repeat(200) }));
    for (let i = 0; i < 5; i++) await expect(store.update("engine-1", (prev) => ({ ...prev!, attempts: i + 2, history }))).rejects.toMatchObject({ code: "ENOSPC" });
    expect(await temps(dir)).toEqual([]);
    expect(await readFile(stateFilePath(dir), "utf8")).toBe(before); // the last good state is intact
    expect(await readFile(journalPath(dir), "utf8")).toBe(journalBefore); // no partial line left behind
    await disk.free();
    // The failed change was kept: the next write carries it.
    await store.flush();
    expect((await readState(dir)).engines["engine-1"]).toMatchObject({ attempts: 6 });
  });
});

describe("sweeping temps a killed writer left", () => {
  it("open removes atomic-write temps of dead pids in state/ and run directories, and keeps everything else", async () => {
    const dead = spawnSync(process.execPath, ["-e", "0"]).pid!;
    const run = path.join(state, "runs", "engine-1", "20250101T000000Z-11111111");
    await mkdir(run, { recursive: true });
    const stale = [
      path.join(state, `.narwhal.json.${dead}.0a1b2c3d.tmp`),
      path.join(state, `controller.lock.${dead}.1733000000000.tmp`), // what an older version's lock left
      path.join(run, `.checked.json.${dead}.deadbeef.tmp`),
    ];
    const kept = [
      path.join(state, `.narwhal.json.${process.pid}.0a1b2c3d.tmp`), // a live writer's, perhaps mid-rename
      path.join(state, "notes.tmp"),
      path.join(run, "launch.json"),
    ];
    for (const f of [...stale, ...kept]) await writeFile(f, "x");
    const store = await stores.open(state);
    expect(store.sweptTemps.sort()).toEqual([...stale].sort());
    for (const f of stale) await expect(stat(f)).rejects.toMatchObject({ code: "ENOENT" });
    for (const f of kept) expect((await stat(f)).isFile()).toBe(true);
  });
});

describe("readState", () => {
  it("returns an empty state for a missing file without creating anything", async () => {
    expect(await readState(state)).toEqual({ version: STATE_VERSION, engines: {} });
    await expect(stat(state)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("reads what the store wrote", async () => {
    const store = await stores.open(state);
    await store.update("engine-2", () => record("engine-2"));
    expect(Object.keys((await readState(state)).engines)).toEqual(["engine-2"]);
  });

  it("throws on a corrupt file rather than reporting an empty fleet", async () => {
    await stores.open(state);
    await writeFile(stateFilePath(state), "{");
    await expect(readState(state)).rejects.toMatchObject({ name: "StateFileError", kind: "corrupt" });
  });
});
