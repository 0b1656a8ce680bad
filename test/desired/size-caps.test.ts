// Desired-file size bounds (issue 14 item 4): engine-launch.json and fleet.json may
// grow with the engine count fleet.json lists; deployment.env keeps its flat 1 MiB,
// and an oversized one reports that alone, not the "required" issues of an empty file.
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { validateDesired } from "../../src/desired/load.js";
import { MAX_FILE_BYTES, PER_ENGINE_BYTES, perEngineCap } from "../../src/desired/size-caps.js";
import { envText, validEnv, validRecord, validTree, writeTree, type DesiredTree, type Obj } from "./fixtures.js";

/** `n` engines, each alone on its own node (GPU 0, default ports), prefill and decode alternating. */
function fleetOf(n: number): DesiredTree {
  const t = validTree();
  const ks = Array.from({ length: n }, (_, i) => i + 1);
  const role = (k: number) => (k % 2 ? "prefill" : "decode");
  t.fleet["engines"] = ks.map((k) => ({
    iid: `n${k}`,
    url: `\${NARWHAL_NODE_${k}_URL}`,
    attestation_url: `\${NARWHAL_NODE_${k}_ATTESTATION_URL}`,
    role: role(k),
  }));
  t.fleet["nodes"] = ks.map((k) => ({ name: `gpu-${k}`, engines: [`n${k}`] }));
  t.launch["engines"] = Object.fromEntries(ks.map((k) => [`engine-${k}`, validRecord(role(k), ["0"])])) as Obj;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(validEnv())) if (!k.startsWith("NARWHAL_NODE_")) env[k] = v;
  for (const k of ks) env[`NARWHAL_NODE_${k}_IP`] = `10.${(k >> 8) & 255}.${k & 255}.1`;
  t.env = env;
  return t;
}

describe("desired-file size bounds", () => {
  it("accepts an engine-launch.json over 1 MiB when fleet.json lists the engines it holds", async () => {
    // 200 records of 6 KiB (launch extras' sources padded) stand in for ~1,500 ordinary ones at a fraction of the validation time.
    const t = fleetOf(200);
    for (const r of Object.values(t.launch["engines"] as Record<string, Obj>))
      r["sources"] = { note: "s".repeat(6000) };
    const dir = await writeTree(t);
    expect((await stat(join(dir, "engine-launch.json"))).size).toBeGreaterThan(MAX_FILE_BYTES);
    const result = await validateDesired(dir);
    expect(result.issues).toEqual([]);
    expect(result.state?.specs).toHaveLength(200);
  });

  it("refuses an engine-launch.json past 1 MiB + 8 KiB per engine, naming the file, its size and the bound", async () => {
    const t = validTree();
    (t.launch["engines"] as Record<string, Obj>)["engine-1"]!["sources"] = {
      pad: "x".repeat(MAX_FILE_BYTES + 2 * PER_ENGINE_BYTES),
    };
    const dir = await writeTree(t);
    const size = (await stat(join(dir, "engine-launch.json"))).size;
    const cap = MAX_FILE_BYTES + 2 * PER_ENGINE_BYTES;
    expect(size).toBeGreaterThan(cap);
    expect((await validateDesired(dir)).issues).toEqual([
      {
        file: "engine-launch.json",
        path: "$",
        rule: "syntax",
        message: `is ${size} bytes; the limit is ${cap} (1 MiB + 8 KiB × 2 engines in fleet.json); shorten it`,
      },
    ]);
  });

  it("holds fleet.json to the bound of the engines it lists", async () => {
    const t = validTree();
    const padded = JSON.stringify(t.fleet).replace(/}$/, `${" ".repeat(MAX_FILE_BYTES + 2 * PER_ENGINE_BYTES)}}`);
    const dir = await writeTree(t, { fleet: padded });
    const issues = (await validateDesired(dir)).issues;
    expect(issues).toEqual([
      expect.objectContaining({
        file: "fleet.json",
        path: "$",
        message: expect.stringMatching(
          /^is \d+ bytes; the limit is 1064960 \(1 MiB \+ 8 KiB × 2 engines in fleet\.json\)/,
        ),
      }),
    ]);
  });

  it("reads no more than the ceiling before the engine count is known", () => {
    expect(perEngineCap(undefined)).toEqual({
      bytes: MAX_FILE_BYTES + 9999 * PER_ENGINE_BYTES,
      why: "1 MiB + 8 KiB × 9999 engines, the most a fleet can name",
    });
    expect(perEngineCap(20000).bytes).toBe(perEngineCap(undefined).bytes);
  });

  it("reports an oversized deployment.env as oversized, and nothing it would have defined as missing", async () => {
    const t = validTree();
    const text = envText(t.env) + "# " + "y".repeat(MAX_FILE_BYTES) + "\n";
    const dir = await writeTree(t, { env: text });
    expect((await validateDesired(dir)).issues).toEqual([
      {
        file: "deployment.env",
        path: "$",
        rule: "syntax",
        message: `is ${Buffer.byteLength(text)} bytes; the limit is ${MAX_FILE_BYTES} (1 MiB); shorten it`,
      },
    ]);
  });
});
