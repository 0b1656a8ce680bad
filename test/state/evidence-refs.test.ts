// The snapshot's evidence by reference to its run directory (src/state/evidence-refs.ts), against real
// run directories written as the phases write them (indented JSON, probed.2.json after a second probe).
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RunFiles, UnrestorableEvidence, withoutRunFiles } from "../../src/state/evidence-refs.js";
import { sha256Hex } from "../../src/desired/hash.js";
import { readState, StateStore } from "../../src/state/store.js";
import { journalPath } from "../../src/state/state-journal.js";
import { record } from "../controller/records.js";

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "narwhal-evidence-"));
});
afterEach(() => rm(root, { recursive: true, force: true }));

// As large as a real one's bulk: the model manifest lists every file of the model.
const manifest = { files: [{ path: "config.json", size: 435 }, ...Array.from({ length: 8 }, (_, i) => ({ path: `model-0000${i + 1}-of-00008.safetensors`, size: 4_976_698_672 }))] };
const inspection = (engine: string) => ({ engine, node: "node-1", gpus: [{ index: 0, uuid: "GPU-1" }], model_manifest: manifest });
const checked = { plan_sha256: "2".repeat(64), vllm_api_version: "0.11.0", packages: { vllm: "0.11.0" } };
const probe = (n: number) => ({ probed_at: `2025-01-01T00:00:0${n}.000Z`, version: "0.11.0", models: ["m"] });

/** A run directory as prepare, check and two probes leave it; its path. */
async function runDir(engine: string, name = "20250101T000000Z-11111111"): Promise<string> {
  const dir = path.join(root, "runs", engine, name);
  await mkdir(dir, { recursive: true });
  const write = (file: string, data: unknown) => writeFile(path.join(dir, file), JSON.stringify(data, null, 2) + "\n");
  await Promise.all([write("inspection.json", inspection(engine)), write("checked.json", checked), write("probed.json", probe(1)), write("probed.2.json", probe(2))]);
  return dir;
}

const snapshotIn = (dir: string | null, engine = "engine-1", over: Record<string, unknown> = {}) => ({
  status: "active",
  value: "captured",
  context: { engine, run: dir ? { engine, dir } : null, inspection: inspection(engine), checked, probe: probe(2), layout: { block_size: 16 }, retiring: null, ...over },
});

const ref = (file: string, data: unknown) => ({ $run_file: file, sha256: sha256Hex(JSON.stringify(data)) });

describe("evidence by reference", () => {
  it("names each file that holds the context's value exactly, and leaves the snapshot it was given as it was", async () => {
    const dir = await runDir("engine-1");
    const snap = snapshotIn(dir);
    const given = JSON.stringify(snap);
    const encoded = (await new RunFiles().encode(snap)) as ReturnType<typeof snapshotIn>;
    expect(encoded.context.inspection).toEqual(ref("inspection.json", inspection("engine-1")));
    expect(encoded.context.checked).toEqual(checked); // the plan binding stays in the state
    expect(encoded.context.probe).toEqual(ref("probed.2.json", probe(2))); // the second probe's file, not the first's
    expect(encoded.context.layout).toEqual({ block_size: 16 }); // not evidence of a file: as it is
    expect(JSON.stringify(snap)).toBe(given);
    expect(JSON.stringify(encoded).length).toBeLessThan(given.length);
  });

  it("keeps inline what no file of its run holds as it is: no run yet, a run reused with an older inspection, a file gone", async () => {
    const files = new RunFiles();
    const noRun = (await files.encode(snapshotIn(null))) as ReturnType<typeof snapshotIn>;
    expect(noRun.context.inspection).toEqual(inspection("engine-1"));
    const dir = await runDir("engine-1");
    const newer = { ...inspection("engine-1"), node: "node-2" };
    const reused = (await files.encode(snapshotIn(dir, "engine-1", { inspection: newer }))) as ReturnType<typeof snapshotIn>;
    expect(reused.context.inspection).toEqual(newer);
    await rm(path.join(dir, "inspection.json"));
    const gone = (await new RunFiles().encode(snapshotIn(dir))) as ReturnType<typeof snapshotIn>;
    expect(gone.context.inspection).toEqual(inspection("engine-1"));
    expect(gone.context.probe).toEqual(ref("probed.2.json", probe(2)));
  });

  it("names the retiring engine's evidence in the retiring engine's run, and reads it back", async () => {
    const old = await runDir("engine-1", "20250101T000000Z-11111111");
    const next = await runDir("engine-1", "20250102T000000Z-22222222");
    const restorable = { inspection: inspection("engine-1"), checked, probe: probe(1), layout: { block_size: 16 } };
    const snap = snapshotIn(next, "engine-1", { retiring: { handle: { kind: "native" }, run: { dir: old }, hash: "1", restorable } });
    const files = new RunFiles();
    const encoded = (await files.encode(snap)) as { context: { retiring: { restorable: Record<string, unknown> } } };
    expect(encoded.context.retiring.restorable["probe"]).toEqual(ref("probed.json", probe(1)));
    expect(encoded.context.retiring.restorable["inspection"]).toEqual(ref("inspection.json", inspection("engine-1")));
    expect(await new RunFiles().join(encoded)).toEqual(snap);
  });

  it("reads every reference back to the snapshot it was made from", async () => {
    const dir = await runDir("engine-1");
    const snap = snapshotIn(dir);
    expect(await new RunFiles().join(await new RunFiles().encode(snap))).toEqual(snap);
  });

  it("refuses a restore whose file is gone, was changed, or is not a file of its run, naming it", async () => {
    const dir = await runDir("engine-1");
    const encoded = (await new RunFiles().encode(snapshotIn(dir))) as ReturnType<typeof snapshotIn>;
    await writeFile(path.join(dir, "probed.2.json"), JSON.stringify({ ...probe(2), edited: true }));
    await expect(new RunFiles().join(encoded)).rejects.toThrow(
      new UnrestorableEvidence(`its probe evidence ${path.join(dir, "probed.2.json")} is not the one the state recorded (sha256 differs)`),
    );
    await rm(path.join(dir, "inspection.json"));
    await expect(new RunFiles().join(encoded)).rejects.toThrow(`its inspection evidence ${path.join(dir, "inspection.json")} cannot be read (ENOENT)`);
    const outside = { ...encoded, context: { ...encoded.context, checked: null, probe: null, inspection: { $run_file: "../../../etc/inspection.json", sha256: "0" } } };
    await expect(new RunFiles().join(outside)).rejects.toThrow('its inspection names "../../../etc/inspection.json", not a file of its run');
  });

  it("shows a reader without the run directory null where a file holds the evidence", async () => {
    const dir = await runDir("engine-1");
    const encoded = (await new RunFiles().encode(snapshotIn(dir))) as ReturnType<typeof snapshotIn>;
    expect(withoutRunFiles(encoded.context)).toMatchObject({ inspection: null, checked, probe: null, layout: { block_size: 16 } });
  });
});

describe("the store with evidence by reference", () => {
  it("journals references, not copies; a restore reads them back, and its first unchanged record writes nothing", async () => {
    const state = path.join(root, "state");
    const dir = await runDir("engine-1");
    const whole = snapshotIn(dir);
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { snapshot: whole }));
    const line = await readFile(journalPath(state), "utf8");
    expect(line).toContain('"$run_file":"inspection.json"');
    expect(line).not.toContain('"model_manifest"');
    expect(store.engine("engine-1")!.snapshot).toEqual(whole); // the controller's memory keeps the whole snapshot
    await store.close();
    const read = (await readState(state)).engines["engine-1"]!;
    expect((read.snapshot as ReturnType<typeof snapshotIn>).context.probe).toEqual(ref("probed.2.json", probe(2)));

    const again = await StateStore.open(state);
    const restored = await again.withEvidence(again.engine("engine-1")!);
    expect(restored.problem).toBeNull();
    expect(restored.record.snapshot).toEqual(whole);
    const writes = again.writes.made;
    await again.update("engine-1", (prev) => ({ ...prev!, snapshot: structuredClone(whole) }));
    expect(again.writes.made).toBe(writes);
    await again.close();
  });

  it("says why a record cannot be restored when its run's evidence changed", async () => {
    const state = path.join(root, "state");
    const dir = await runDir("engine-1");
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { snapshot: snapshotIn(dir) }));
    await store.close();
    await writeFile(path.join(dir, "inspection.json"), JSON.stringify({ ...inspection("engine-1"), node: "node-9" }));
    const again = await StateStore.open(state);
    const { problem } = await again.withEvidence(again.engine("engine-1")!);
    expect(problem).toBe(`its inspection evidence ${path.join(dir, "inspection.json")} is not the one the state recorded (sha256 differs)`);
    await again.close();
  });
});
