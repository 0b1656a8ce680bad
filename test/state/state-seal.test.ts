// The seal of narwhal.json (src/state/state-seal.ts): a base the store wrote is taken as written; any
// byte changed, a base cut short, another state version or schema revision, and a hand edit are not,
// and a hand-edited base is checked record by record as before.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import crypto from "node:crypto";
import * as z from "zod";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { hasIntactSeal, sealJson, SEAL_REVISION } from "../../src/state/state-seal.js";
import { readStateFile, STATE_VERSION, StateFileSchema } from "../../src/state/state-file.js";
import { readState, StateStore, stateFilePath } from "../../src/state/store.js";
import { journalPath } from "../../src/state/state-journal.js";
import { record } from "../controller/records.js";

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "narwhal-seal-"));
});
afterEach(() => rm(root, { recursive: true, force: true }));

describe("the state file's seal", () => {
  it("is of this schema: a change of StateFileSchema must bump SEAL_REVISION (and this digest)", () => {
    const schema = crypto.createHash("sha256").update(JSON.stringify(z.toJSONSchema(StateFileSchema))).digest("hex");
    // When this fails, the schema changed: a seal made under the old one must not vouch for a file now.
    // Bump SEAL_REVISION in src/state/state-seal.ts, then put the new digest here.
    expect({ revision: SEAL_REVISION, schema }).toEqual({ revision: 2, schema: "8fef0dced4fde45f7ab0b5f014116294db5975bf7aa3d4fa5741de597835eb7a" });
  });

  it("holds for exactly the bytes it was made of, for its state version", () => {
    const json = JSON.stringify({ version: STATE_VERSION, engines: { "engine-1": { phase: "captured" } }, journal_seq: 3 });
    const sealed = sealJson(json, STATE_VERSION);
    expect(JSON.parse(sealed)).toMatchObject({ journal_seq: 3, seal: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const bytes = Buffer.from(sealed);
    expect(hasIntactSeal(bytes, STATE_VERSION)).toBe(true);
    expect(hasIntactSeal(bytes, STATE_VERSION + 1)).toBe(false);
    for (let i = 0; i < bytes.length; i += 7) {
      const flipped = Buffer.from(bytes);
      flipped[i] = flipped[i]! ^ 1;
      expect(hasIntactSeal(flipped, STATE_VERSION), `byte ${i}`).toBe(false);
    }
    expect(hasIntactSeal(bytes.subarray(0, bytes.length - 1), STATE_VERSION)).toBe(false);
    expect(hasIntactSeal(Buffer.from(json + "\n"), STATE_VERSION)).toBe(false);
  });

  it("is written by the store, and a base edited by hand is checked record by record again", async () => {
    const state = path.join(root, "state");
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1"));
    await store.close();
    const file = stateFilePath(state);
    const text = await readFile(file, "utf8");
    expect(hasIntactSeal(Buffer.from(text), STATE_VERSION)).toBe(true);
    const read = (await readStateFile(file))!;
    expect(read.engines["engine-1"]!.phase).toBe(record("engine-1").phase);
    expect(read).not.toHaveProperty("seal"); // the next write seals what it writes, once
    // The seal left as it was: the edit breaks it, and the record the edit broke is found.
    await writeFile(file, text.replace('"engine":"engine-1"', '"engine":"engine-9"'));
    await expect(readStateFile(file)).rejects.toThrow(/is not a narwhal state file: \$\.engines\["engine-1"\]\.engine: names engine "engine-9"/);
  });

  it("seals every journal line too, and a line edited by hand is checked again and refused", async () => {
    const state = path.join(root, "state");
    const store = await StateStore.open(state);
    await store.update("engine-1", () => record("engine-1"));
    await store.update("engine-1", (prev) => ({ ...prev!, phase: "probed" }));
    const lines = (await readFile(journalPath(state), "utf8")).split("\n").slice(0, -1);
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(hasIntactSeal(Buffer.from(`${line}\n`), STATE_VERSION)).toBe(true);
    expect((await readState(state)).engines["engine-1"]!.phase).toBe("probed");
    // The seal kept, the record made into something no engine record is: found, naming the line.
    await writeFile(journalPath(state), `${lines[0]}\n${lines[1]!.replace('"engine":"engine-1","backend"', '"engine":7,"backend"')}\n`);
    await expect(readState(state)).rejects.toMatchObject({ name: "StateFileError", message: expect.stringContaining("line 2 is not a journal entry") });
    await store.close().catch(() => undefined);
  });
});
