// The state journal: a write appends what changed (O(1) in fleet size), changes made together are one
// write, a change that changes nothing is none, a crash between files loses nothing acknowledged and
// replays nothing twice, and a narwhal.json from before the journal opens with every engine.
import { appendFile, copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readState, STATE_VERSION, stateFilePath, type EngineRecord } from "../../src/state/store.js";
import { journalPath } from "../../src/state/state-journal.js";
import { record } from "../controller/records.js";
import { openStores } from "./open-stores.js";

const stores = openStores();
let root: string;
let state: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "narwhal-journal-"));
  state = path.join(root, "state");
});
afterEach(async () => {
  await stores.closeAll();
  await rm(root, { recursive: true, force: true });
});

const names = (n: number) => Array.from({ length: n }, (_, i) => `engine-${i}`);
const size = async (f: string) => (await stat(f).catch(() => null))?.size ?? 0;

/** A narwhal.json as narwhal wrote it before the journal: version 1, pretty, no journal_seq. */
async function oldStateFile(engines: string[]): Promise<void> {
  await mkdir(state, { recursive: true, mode: 0o700 });
  const file = { version: 1, engines: Object.fromEntries(engines.map((e) => [e, record(e)])), suspended: { "engine-1": "2025-01-01T00:00:00.000Z" } };
  await writeFile(stateFilePath(state), JSON.stringify(file, null, 2) + "\n", { mode: 0o600 });
}

describe("migration of a state file from before the journal", () => {
  it("opens with every engine, journals the next change, and folds it all into narwhal.json on close", async () => {
    await oldStateFile(names(5));
    const store = await stores.open(state);
    expect(Object.keys(store.data.engines).sort()).toEqual(names(5));
    expect(store.suspended()).toEqual({ "engine-1": "2025-01-01T00:00:00.000Z" });
    expect(store.movedAside).toBeNull();
    // Rewritten in this version at open, before anything is appended: a narwhal of version 1 refuses it now.
    expect(JSON.parse(await readFile(stateFilePath(state), "utf8"))).toMatchObject({ version: STATE_VERSION, journal_seq: 0 });
    await store.update("engine-3", (prev) => ({ ...prev!, phase: "probed" }));
    const read = await readState(state);
    expect(Object.keys(read.engines).sort()).toEqual(names(5));
    expect(read.engines["engine-3"]!.phase).toBe("probed");
    expect(read.suspended).toEqual({ "engine-1": "2025-01-01T00:00:00.000Z" });
    await store.close();
    await expect(stat(journalPath(state))).rejects.toMatchObject({ code: "ENOENT" });
    const base = JSON.parse(await readFile(stateFilePath(state), "utf8")) as { version: number; journal_seq: number; engines: Record<string, EngineRecord> };
    expect(base.version).toBe(STATE_VERSION);
    expect(base.journal_seq).toBe(1);
    expect(Object.keys(base.engines).sort()).toEqual(names(5));
    expect(base.engines["engine-3"]!.phase).toBe("probed");
    expect("journal_seq" in (await readState(state))).toBe(false); // readers see the state, not the bookkeeping
  });
});

describe("a crash between files", () => {
  it("a journal a killed controller left is read by status and folded in by the next open; its cut-short last line is dropped", async () => {
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1", { phase: "inspected" }));
    await store.update("engine-2", () => record("engine-2", { phase: "checked" }));
    // SIGKILL mid-append: half a line after the acknowledged ones (never closed, never folded).
    await appendFile(journalPath(state), '{"seq":3,"ops":[{"engine":"engine-1","record":{"engine":"engine-1","pha');
    const read = await readState(state);
    expect(read.engines["engine-1"]!.phase).toBe("inspected");
    expect(read.engines["engine-2"]!.phase).toBe("checked");
    const again = await stores.open(state);
    expect(again.engine("engine-1")!.phase).toBe("inspected");
    await expect(stat(journalPath(state))).rejects.toMatchObject({ code: "ENOENT" }); // folded, the torn line gone
    await again.update("engine-1", (prev) => ({ ...prev!, phase: "prepared" }));
    expect((await readState(state)).engines["engine-1"]!.phase).toBe("prepared");
  });

  it("a fold killed after the new narwhal.json but before the journal's removal replays nothing twice", async () => {
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1", { history: [] }));
    await store.update("engine-1", (prev) => ({ ...prev!, history: [...prev!.history, { at: "t1", from: "a", to: "b" }] }));
    await store.update("engine-2", () => record("engine-2"));
    await copyFile(journalPath(state), path.join(root, "journal"));
    await store.close();
    const folded = await readState(state);
    await copyFile(path.join(root, "journal"), journalPath(state)); // as the killed fold left it
    expect(await readState(state)).toEqual(folded);
    const again = await stores.open(state);
    expect(again.engine("engine-1")!.history).toHaveLength(1);
    await again.update("engine-2", (prev) => ({ ...prev!, attempts: 3 })); // the next seq, not one the base holds
    expect((await readState(state)).engines["engine-2"]!.attempts).toBe(3);
  });

  it("a journal line that is not an entry (not a cut-short last line) is moved aside; narwhal.json is kept", async () => {
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1"));
    await store.close();
    await writeFile(journalPath(state), '{"seq":2,"ops":[{"engine":"engine-1","record":null}]}\n{"seq":3,"ops":[{"engine":"engine-1","record":{"engine":7}}]}\n');
    await expect(readState(state)).rejects.toMatchObject({ name: "StateFileError", kind: "corrupt", input: journalPath(state), message: expect.stringContaining("line 2") });
    const again = await stores.open(state);
    expect(again.movedAside).toMatch(/narwhal\.journal\.corrupt-/);
    expect(Object.keys(again.data.engines)).toEqual(["engine-1"]); // narwhal.json as the last fold wrote it
  });

  it("readers racing writes and folds always see a state that was written: two engines changed together are never seen apart", async () => {
    const store = await stores.open(state);
    // Large records, so the journal outgrows its 1 MiB floor and is folded several times during the race.
    const history = Array.from({ length: 50 }, (_, i) => ({ at: `t${i}`, from: "a", to: "b", note: "n".repeat(1000) }));
    await Promise.all(["a", "b"].map((e) => store.update(e, () => record(e, { history }))));
    let folds = 0;
    let writing = true;
    const writer = (async () => {
      for (let k = 1; k <= 60; k++) {
        const before = await size(journalPath(state));
        await Promise.all(["a", "b"].map((e) => store.update(e, (prev) => ({ ...prev!, attempts: k }))));
        if ((await size(journalPath(state))) < before) folds++;
      }
      writing = false;
    })();
    let reads = 0;
    while (writing) {
      const s = await readState(state);
      expect(s.engines["a"]!.attempts).toBe(s.engines["b"]!.attempts);
      reads++;
    }
    await writer;
    expect(folds).toBeGreaterThan(0);
    expect(reads).toBeGreaterThan(5);
    expect((await readState(state)).engines["a"]!.attempts).toBe(60);
  });
});

describe("writes that change nothing, and writes made together", () => {
  it("an update, proof or suspension that changes nothing makes no write and keeps updated_at", async () => {
    const store = await stores.open(state);
    await store.update("engine-1", () => record("engine-1"));
    await store.setSuspended(["engine-1"], true, "2026-01-01T00:00:00.000Z");
    const made = store.writes.made;
    const journal = await readFile(journalPath(state), "utf8");
    const updatedAt = store.engine("engine-1")!.updated_at;
    await store.update("engine-1", (prev) => ({ ...prev!, history: [...prev!.history] }));
    await store.setSuspended(["engine-1"], true);
    await store.setSuspended(["engine-2"], false);
    await store.setProof("engine-1>engine-2", null);
    await store.update("engine-9", () => null);
    expect(store.writes).toMatchObject({ made, skipped: 5 });
    expect(await readFile(journalPath(state), "utf8")).toBe(journal);
    expect(store.engine("engine-1")!.updated_at).toBe(updatedAt);
    await store.update("engine-1", (prev) => ({ ...prev!, attempts: 1 }));
    expect(store.writes.made).toBe(made + 1);
  });

  it("updates of 100 engines issued in one tick, and records marked then flushed, are one write each", async () => {
    const store = await stores.open(state);
    await Promise.all(names(100).map((e) => store.update(e, () => record(e))));
    expect(store.writes.made).toBe(1);
    for (const e of names(100)) {
      store.engine(e)!.observed_at = "2026-01-01T00:00:00.000Z";
      store.mark(e);
    }
    await store.flush();
    expect(store.writes.made).toBe(2);
    expect(Object.values((await readState(state)).engines).every((r) => r.observed_at === "2026-01-01T00:00:00.000Z")).toBe(true);
  });

  it("engines that changed in nothing but observed_at are one small op, replayed and folded", async () => {
    const store = await stores.open(state);
    await Promise.all(names(20).map((e) => store.update(e, () => record(e))));
    await store.close(); // all in narwhal.json, the journal empty
    const again = await stores.open(state);
    const at = "2026-02-02T00:00:00.000Z";
    for (const e of names(20)) {
      again.engine(e)!.observed_at = at;
      again.markObservedAt(e);
    }
    // engine-3 also changed otherwise: written whole, once, its observed_at in it.
    again.engine("engine-3")!.phase = "probed";
    again.mark("engine-3");
    await again.flush();
    expect(again.writes.made).toBe(1);
    const [line] = (await readFile(journalPath(state), "utf8")).split("\n");
    const entry = JSON.parse(line!) as { ops: Array<Record<string, unknown>> };
    expect(entry.ops).toEqual([
      { engine: "engine-3", record: expect.objectContaining({ phase: "probed", observed_at: at }) },
      { observed: at, engines: names(20).filter((e) => e !== "engine-3") },
    ]);
    // Nineteen engines' observation takes less room than one record.
    expect(JSON.stringify(entry.ops[1]).length).toBeLessThan(JSON.stringify(entry.ops[0]).length);
    const read = await readState(state);
    expect(Object.values(read.engines).every((r) => r.observed_at === at)).toBe(true);
    expect(read.engines["engine-3"]!.phase).toBe("probed");
    expect(read.engines["engine-4"]!.updated_at).toBe(again.engine("engine-4")!.updated_at); // not a write of the record
    await again.close();
    expect((await readState(state)).engines["engine-7"]!.observed_at).toBe(at);
  });

  it("a journal of observations alone outlives a clean exit until it is an eighth of the base; a record change is folded at close", async () => {
    const first = await stores.open(state);
    await Promise.all(names(20).map((e) => first.update(e, () => record(e))));
    await first.close();
    const base = await readFile(stateFilePath(state));
    // As `reconcile --once` no-ops do: open, observe every engine (nothing else changes), close.
    const observeAll = async (at: string) => {
      const store = await stores.open(state);
      for (const e of names(20)) {
        store.engine(e)!.observed_at = at;
        store.markObservedAt(e);
      }
      await store.close();
    };
    let kept = 0;
    let run = 0;
    for (; run < 40; run++) {
      const before = await size(journalPath(state));
      await observeAll(`2026-03-03T00:00:${String(run).padStart(2, "0")}.000Z`);
      const after = await size(journalPath(state));
      if (after === 0) break; // folded
      expect(after).toBeGreaterThan(before); // appended to: the open did not fold what the last close kept
      expect((await readFile(stateFilePath(state))).equals(base)).toBe(true); // narwhal.json not rewritten
      expect(after).toBeLessThanOrEqual(base.length / 8);
      expect(Object.values((await readState(state)).engines).every((r) => r.observed_at === `2026-03-03T00:00:${String(run).padStart(2, "0")}.000Z`)).toBe(true);
      kept = after;
    }
    expect(run).toBeGreaterThan(1); // kept more than once, then folded, not at the first close
    expect(run).toBeLessThan(40);
    const folded = JSON.parse(await readFile(stateFilePath(state), "utf8")) as { engines: Record<string, EngineRecord> };
    expect(Object.values(folded.engines).every((r) => r.observed_at === `2026-03-03T00:00:${String(run).padStart(2, "0")}.000Z`)).toBe(true);
    expect(kept).toBeGreaterThan(0);
    // A kept observation journal, then a record changed: narwhal.json holds every record after the close.
    await observeAll("2026-03-04T00:00:00.000Z");
    expect(await size(journalPath(state))).toBeGreaterThan(0);
    const changer = await stores.open(state);
    await changer.update("engine-5", (prev) => ({ ...prev!, phase: "probed" }));
    await changer.close();
    await expect(stat(journalPath(state))).rejects.toMatchObject({ code: "ENOENT" });
    const after = JSON.parse(await readFile(stateFilePath(state), "utf8")) as { engines: Record<string, EngineRecord> };
    expect(after.engines["engine-5"]!.phase).toBe("probed");
    expect(after.engines["engine-6"]!.observed_at).toBe("2026-03-04T00:00:00.000Z");
  });

  it("a killed controller's journal of records is folded at the next open, one of observations alone is not", async () => {
    const store = await stores.open(state);
    await Promise.all(names(4).map((e) => store.update(e, () => record(e))));
    await store.close();
    const base = await readFile(stateFilePath(state));
    const killed = await stores.open(state); // never closed: as SIGKILL leaves it
    killed.engine("engine-1")!.observed_at = "2026-04-04T00:00:00.000Z";
    killed.markObservedAt("engine-1");
    await killed.flush();
    const observing = await stores.open(state);
    expect((await readFile(stateFilePath(state))).equals(base)).toBe(true);
    expect(observing.engine("engine-1")!.observed_at).toBe("2026-04-04T00:00:00.000Z");
    await observing.update("engine-2", (prev) => ({ ...prev!, attempts: 2 })); // killed after a record change
    const reopened = await stores.open(state);
    await expect(stat(journalPath(state))).rejects.toMatchObject({ code: "ENOENT" });
    expect(reopened.engine("engine-2")!.attempts).toBe(2);
    expect(JSON.parse(await readFile(stateFilePath(state), "utf8")).engines["engine-1"].observed_at).toBe("2026-04-04T00:00:00.000Z");
  });

  it("one transition appends the same bytes at 10 and at 1000 engines (O(1) in fleet size)", async () => {
    const appended = async (n: number) => {
      const dir = path.join(root, `fleet-${n}`);
      const store = await stores.open(dir);
      await Promise.all(names(n).map((e) => store.update(e, () => record(e))));
      await store.close(); // all in narwhal.json, the journal empty
      const before = await size(stateFilePath(dir));
      await store.update("engine-0", (prev) => ({ ...prev!, phase: "probed", updated_at: "x" }));
      expect(await size(stateFilePath(dir))).toBe(before); // narwhal.json is not rewritten
      return size(journalPath(dir));
    };
    const small = await appended(10);
    expect(small).toBeGreaterThan(0);
    expect(await appended(1000)).toBe(small);
  });
});
