// Applied inputs by reference: a record names inputs/<sha256>.json instead of holding its spec's inputs;
// the file holds exactly them, an unchanged record is no write, a fold removes files no record names,
// a file that is gone or altered reads as unknown (never as other inputs), an older state is rewritten
// with references, and an observation reads only the inputs of engines desired/ changed.
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readState, STATE_VERSION, StateStore, stateFilePath } from "../../src/state/store.js";
import { InputsFiles, inputsDir, isInputsRef } from "../../src/state/applied-inputs.js";
import { canonicalJson, sha256Hex } from "../../src/desired/hash.js";
import { observe, knownFromRecords } from "../../src/controller/observe.js";
import { World } from "../../src/controller/world.js";
import type { EngineBackend } from "../../src/backends/types.js";
import type { Logger } from "../../src/log.js";
import { record } from "../controller/records.js";

let root: string;
let state: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "narwhal-inputs-"));
  state = path.join(root, "state");
});
afterEach(() => rm(root, { recursive: true, force: true }));

const inputs = (port: number) => ({ name: "engine-1", http_port: port, launch: { vllm_args: ["--tensor-parallel-size", "1"] } });
const files = async () => (await readdir(inputsDir(state)).catch(() => [] as string[])).sort();

describe("applied inputs by reference", () => {
  it("are persisted as their file's sha256; the file holds their canonical JSON and reads back as they were", async () => {
    const store = await StateStore.open(state);
    const applied = inputs(8000);
    await store.update("engine-1", () => record("engine-1", { applied_inputs: applied }));
    await store.close();
    const sha256 = sha256Hex(canonicalJson(applied));
    const onDisk = (await readState(state)).engines["engine-1"]!.applied_inputs;
    expect(onDisk).toEqual({ $inputs: sha256 });
    expect(await readFile(path.join(inputsDir(state), `${sha256}.json`), "utf8")).toBe(canonicalJson(applied));
    expect(await new InputsFiles(state).resolve(onDisk)).toEqual(applied);
    // The base no longer carries them: a converged record's largest part is not parsed by every reader.
    expect(await readFile(stateFilePath(state), "utf8")).not.toContain('"http_port"');
  });

  it("a record whose inputs are the same as its file's is not written again", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { applied_inputs: inputs(8000) }));
    await store.close();
    const again = await StateStore.open(state);
    expect(isInputsRef(again.engine("engine-1")!.applied_inputs)).toBe(true);
    const made = again.writes.made;
    // As a restored engine's first record holds them: the inputs object of its spec, equal to the file.
    await again.update("engine-1", (prev) => ({ ...prev!, applied_inputs: inputs(8000) }));
    expect(again.writes).toMatchObject({ made, skipped: 1 });
    await again.update("engine-1", (prev) => ({ ...prev!, applied_inputs: inputs(8001) }));
    expect(again.writes.made).toBe(made + 1);
    await again.close();
  });

  it("a restored record written again finds its inputs file there: nothing is written into inputs/", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { applied_inputs: inputs(8000) }));
    await store.close();
    // A temporary file made and removed beside the inputs files would move the directory's mtime.
    const past = new Date("2026-01-01T00:00:00Z");
    await utimes(inputsDir(state), past, past);
    const again = await StateStore.open(state);
    const made = again.writes.made;
    // As a controller's start persists what it restored: the spec's inputs object and a new observation.
    await again.update("engine-1", (prev) => ({ ...prev!, applied_inputs: inputs(8000), attempts: 1 }));
    expect(again.writes.made).toBe(made + 1);
    await again.close();
    expect((await stat(inputsDir(state))).mtime).toEqual(past);
    expect(await files()).toHaveLength(1);
  });

  it("a fold removes the files no record names, and keeps those records share", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { applied_inputs: inputs(8000) }));
    await store.update("engine-2", () => record("engine-2", { applied_inputs: inputs(8000) })); // equal inputs: one file
    expect(await files()).toHaveLength(1);
    await store.update("engine-1", (prev) => ({ ...prev!, applied_inputs: inputs(8001) }));
    expect(await files()).toHaveLength(2); // the journal's older lines may still name the first: kept until the fold
    await store.update("engine-2", () => null);
    await store.close();
    expect(await files()).toEqual([`${sha256Hex(canonicalJson(inputs(8001)))}.json`]);
  });

  it("a file that is gone or altered reads as unknown inputs, never as other ones; a write restores it", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { applied_inputs: inputs(8000) }));
    await store.close();
    const ref = (await readState(state)).engines["engine-1"]!.applied_inputs;
    const [name] = await files();
    await writeFile(path.join(inputsDir(state), name!), canonicalJson(inputs(9999)));
    expect(await new InputsFiles(state).resolve(ref)).toBeNull();
    await rm(path.join(inputsDir(state), name!));
    expect(await new InputsFiles(state).resolve(ref)).toBeNull();
    expect(await new InputsFiles(state).resolve({ $inputs: "../../etc/passwd" })).toBeNull();
    // The next controller that applies those inputs writes their file again.
    const again = await StateStore.open(state);
    await again.update("engine-1", (prev) => ({ ...prev!, applied_inputs: inputs(8000), attempts: 1 }));
    await again.close();
    expect(await new InputsFiles(state).resolve(ref)).toEqual(inputs(8000));
  });

  it("a state of version 2 holding them inline is rewritten with references when a store opens it", async () => {
    await mkdir(state, { recursive: true, mode: 0o700 });
    const file = { version: 2, engines: { "engine-1": record("engine-1", { applied_inputs: inputs(8000) }) } };
    await writeFile(stateFilePath(state), JSON.stringify(file), { mode: 0o600 });
    expect((await readState(state)).engines["engine-1"]!.applied_inputs).toEqual(inputs(8000)); // read as it is
    const store = await StateStore.open(state);
    await store.close();
    const base = JSON.parse(await readFile(stateFilePath(state), "utf8")) as { version: number; engines: Record<string, { applied_inputs: unknown }> };
    expect(base.version).toBe(STATE_VERSION);
    expect(await new InputsFiles(state).resolve(base.engines["engine-1"]!.applied_inputs as never)).toEqual(inputs(8000));
  });
});

describe("an observation", () => {
  const quiet: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: () => undefined,
    error: () => undefined,
    child: () => quiet,
    addSecrets: () => undefined,
    recordTo: () => undefined,
    close: async () => undefined,
  };
  // Liveness is not what this observes: every handle answers alive.
  const backend = { kind: "native", isAlive: async () => true, listOwned: async () => [] } as unknown as EngineBackend;

  it("reads the inputs of an engine desired at other inputs, and of no other", async () => {
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1", { desired_hash: "a".repeat(64), applied_inputs: inputs(8000) }));
    await store.update("engine-2", () => record("engine-2", { desired_hash: "b".repeat(64), applied_inputs: inputs(8002) }));
    await store.close();
    const records = Object.values((await readState(state)).engines);
    const reads: unknown[] = [];
    const files = new InputsFiles(state);
    const observed = await observe(new World({ native: backend, container: backend }, quiet, 1000), knownFromRecords(records), [], {
      probe: true,
      key: false,
      health: false,
      owned: null,
      secrets: [],
      serving: null,
      inputs: {
        // engine-1 is desired as applied; engine-2 at other inputs.
        desiredHash: new Map([
          ["engine-1", "a".repeat(64)],
          ["engine-2", "c".repeat(64)],
        ]),
        read: (value) => {
          reads.push(value);
          return files.resolve(value);
        },
      },
    });
    expect(reads).toHaveLength(1);
    expect(observed.engines["engine-2"]!.applied_inputs).toEqual(inputs(8002));
    expect(observed.engines["engine-1"]!.applied_inputs).toBeNull(); // not read: no change to name
  });
});
