// engine-launch.json parsed one distinct record at a time (launch-parse.ts) gives what the
// schema gives the whole document: the same data, key for key, and the same issues.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseLaunchDocument } from "../../src/desired/launch-parse.js";
import { EngineLaunchSchema } from "../../src/desired/schemas.js";
import { validRecord, type Obj } from "./fixtures.js";

const same = (doc: unknown) => {
  const whole = EngineLaunchSchema.safeParse(doc);
  const byRecord = parseLaunchDocument(doc);
  expect(byRecord.success).toBe(whole.success);
  expect(byRecord.data).toStrictEqual(whole.data);
  expect(JSON.stringify(byRecord.data)).toBe(JSON.stringify(whole.data));
  expect(byRecord.error?.issues).toStrictEqual(whole.error?.issues);
  return byRecord;
};

const records = (n: number, edit: (k: number, r: Obj) => Obj = (_k, r) => r): Obj =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      `engine-${i + 1}`,
      edit(i + 1, validRecord(i % 2 ? "decode" : "prefill", ["0"])),
    ]),
  );

describe("parseLaunchDocument", () => {
  it("parses the shipped records as the schema does, with and without $schema", () => {
    for (const file of ["desired/engine-launch.json", "examples/container-sim/engine-launch.json"]) {
      const doc = JSON.parse(readFileSync(file, "utf8")) as Obj;
      same(doc);
      const { $schema: _s, ...bare } = doc;
      same(bare);
    }
  });

  it("gives every engine of repeated records its own copy of the parse", () => {
    const r = same({ engines: records(6) });
    const engines = r.data!.engines;
    expect(engines["engine-1"]).not.toBe(engines["engine-3"]);
    expect(engines["engine-1"]!.runtime).not.toBe(engines["engine-3"]!.runtime);
    expect(engines["engine-1"]!.gpu_ids).not.toBe(engines["engine-3"]!.gpu_ids);
  });

  it("reports what the schema reports: a failing record, a bad name, another key, no engines", () => {
    same({ engines: records(4, (k, r) => (k === 3 ? { ...r, tensor_parallel_size: 0 } : r)) });
    same({ engines: { ...records(2), "engine-x": validRecord("decode", ["1"]) } });
    same({ engines: records(2), extra: true });
    same({ $schema: 1, engines: records(2) });
    same({ engines: {} });
    same({ engines: [] });
    same([]);
    same(null);
  });

  it("normalises integer GPU ids in repeated records as the schema does", () => {
    same({ engines: records(4, (_k, r) => ({ ...r, gpu_ids: [0] })) });
  });
});
