// The lowdb state file: created on open, persisted on update, history capped,
// corrupt files moved aside (never silently reset), always 0600.
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readState, STATE_VERSION, StateStore, stateFilePath } from "../../src/state/store.js";
import { record } from "../controller/records.js";

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
  await rm(root, { recursive: true, force: true });
});

const onDisk = async () => JSON.parse(await readFile(stateFilePath(state), "utf8")) as { version: number; engines: Record<string, unknown> };

describe("StateStore", () => {
  it("open creates the state dir (0700) with an empty state", async () => {
    const store = await StateStore.open(state);
    expect((await stat(state)).mode & 0o777).toBe(0o700);
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
    expect(store.movedAside).toBeNull();
  });

  it("update persists the record, flush writes 0600 even under umask 000, and a reopen reads it back", async () => {
    process.umask(0o000);
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { phase: "checked" }));
    expect((await stat(stateFilePath(state))).mode & 0o777).toBe(0o600);
    expect((await onDisk()).engines["engine-1"]).toMatchObject({ engine: "engine-1", phase: "checked" });
    const again = await StateStore.open(state);
    expect(again.engine("engine-1")?.phase).toBe("checked");
    expect(again.engine("engine-1")?.updated_at).not.toBe("2025-01-01T00:00:00.000Z");
  });

  it("update passes the previous record and null deletes it", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { attempts: 1 }));
    await store.update("engine-1", (prev) => ({ ...prev!, attempts: prev!.attempts + 1 }));
    expect((await onDisk()).engines["engine-1"]).toMatchObject({ attempts: 2 });
    await store.update("engine-1", () => null);
    expect((await onDisk()).engines).toEqual({});
  });

  it("caps the history at the 50 newest entries", async () => {
    const store = await StateStore.open(state);
    const history = Array.from({ length: 120 }, (_, i) => ({ at: `t${i}`, from: "a", to: "b", note: String(i) }));
    await store.update("engine-1", () => record("engine-1", { history }));
    const saved = (await onDisk()).engines["engine-1"] as { history: Array<{ note: string }> };
    expect(saved.history).toHaveLength(50);
    expect(saved.history[0]!.note).toBe("70");
    expect(saved.history.at(-1)!.note).toBe("119");
  });

  it("concurrent updates all land (writes are chained)", async () => {
    const store = await StateStore.open(state);
    await Promise.all(Array.from({ length: 10 }, (_, i) => store.update(`engine-${i}`, () => record(`engine-${i}`))));
    expect(Object.keys((await onDisk()).engines)).toHaveLength(10);
    expect((await readdir(state)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("moves a corrupt state file aside instead of silently resetting it", async () => {
    await StateStore.open(state);
    await writeFile(stateFilePath(state), '{"version": 1, "engines": {"engine-1": ');
    const store = await StateStore.open(state);
    expect(store.movedAside).toMatch(/narwhal\.json\.corrupt-\d{4}-\d{2}-\d{2}T\d{9}Z$/);
    const names = await readdir(state);
    expect(names.filter((n) => n.startsWith("narwhal.json.corrupt-"))).toHaveLength(1);
    expect(await readFile(store.movedAside!, "utf8")).toBe('{"version": 1, "engines": {"engine-1": ');
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
  });

  it.each(["null", "[]", "{}", '{"version": 1}', '"text"'])("treats %s (valid JSON, not a state file) as corrupt", async (text) => {
    await StateStore.open(state);
    await writeFile(stateFilePath(state), text);
    const store = await StateStore.open(state);
    expect(store.movedAside).not.toBeNull();
    expect(await readFile(store.movedAside!, "utf8")).toBe(text);
    expect(store.data).toEqual({ version: STATE_VERSION, engines: {} });
  });

  it("an IO error reading the state file is reported, not treated as corruption", async () => {
    await mkdir(stateFilePath(state), { recursive: true }); // EISDIR on read
    await expect(StateStore.open(state)).rejects.toMatchObject({ code: "EISDIR" });
    expect((await readdir(state)).filter((n) => n.includes("corrupt"))).toEqual([]);
  });

  it("refuses a state file of another version", async () => {
    await StateStore.open(state);
    await writeFile(stateFilePath(state), JSON.stringify({ version: 99, engines: {} }));
    await expect(StateStore.open(state)).rejects.toThrow(/version 99/);
  });
});

describe("readState", () => {
  it("returns an empty state for a missing file without creating anything", async () => {
    expect(await readState(state)).toEqual({ version: STATE_VERSION, engines: {} });
    await expect(stat(state)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("reads what the store wrote", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-2", () => record("engine-2"));
    expect(Object.keys((await readState(state)).engines)).toEqual(["engine-2"]);
  });

  it("throws on a corrupt file rather than reporting an empty fleet", async () => {
    await StateStore.open(state);
    await writeFile(stateFilePath(state), "{");
    await expect(readState(state)).rejects.toThrow();
  });
});
