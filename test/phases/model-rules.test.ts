// One auto_map test and one list of convolutional-SSM keys (model-meta.ts MODEL_RULES) for
// prepare and for the runtime scripts: the same corpus of configs through readModelMeta on a
// node's files, hasAutoMap / isConvSsmConfig, and check_runtime.py's and inspect_runtime.py's
// functions run by /usr/bin/python3 with the MODEL_RULES narwhal passes them. Any disagreement fails.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/app.js";
import { LocalHost } from "../../src/hosts/local.js";
import { hasAutoMap, isConvSsmConfig, MODEL_RULES, readModelMeta } from "../../src/phases/model-meta.js";

const host = new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" });

/** config.json bodies and what both sides must conclude from them. */
const CORPUS: Array<{ name: string; config: Record<string, unknown>; auto_map: boolean; conv_ssm: boolean }> = [
  { name: "missing", config: { model_type: "llama" }, auto_map: false, conv_ssm: false },
  { name: "null", config: { model_type: "llama", auto_map: null }, auto_map: false, conv_ssm: false },
  { name: "empty object", config: { model_type: "llama", auto_map: {} }, auto_map: false, conv_ssm: false },
  { name: "empty array", config: { model_type: "llama", auto_map: [] }, auto_map: false, conv_ssm: false },
  { name: "a string", config: { model_type: "llama", auto_map: "x.Y" }, auto_map: false, conv_ssm: false },
  { name: "non-empty", config: { model_type: "x", auto_map: { AutoConfig: "c.C" } }, auto_map: true, conv_ssm: false },
  { name: "legacy array", config: { auto_map: ["tok.Tok", null] }, auto_map: true, conv_ssm: false },
  ...MODEL_RULES.conv_ssm_model_types.map((t) => ({
    name: `type ${t}`,
    config: { model_type: t.toUpperCase() },
    auto_map: false,
    conv_ssm: true,
  })),
  ...MODEL_RULES.conv_ssm_config_keys.map((k) => ({
    name: `key ${k}`,
    config: { model_type: "hybrid", [k]: 4 },
    auto_map: false,
    conv_ssm: true,
  })),
  { name: "conv key null", config: { model_type: "llama", conv_kernel: null }, auto_map: false, conv_ssm: false },
];

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), "narwhal-rules-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** Each corpus config through the scripts' own functions, with MODEL_RULES as they receive it. */
async function pythonVerdicts(): Promise<Array<{ auto_map: boolean; conv_ssm: boolean; inspect_conv_ssm: boolean }>> {
  const program = [
    "import json, sys",
    "sys.path.insert(0, sys.argv[1])",
    "import check_runtime as c, inspect_runtime as i",
    "rules, corpus = json.loads(sys.argv[2]), json.loads(sys.argv[3])",
    "print(json.dumps([{'auto_map': c.has_auto_map(k), 'conv_ssm': c.is_conv_ssm(k, rules),",
    "                   'inspect_conv_ssm': i.is_conv_ssm(k, rules)} for k in corpus]))",
  ].join("\n");
  const args = [path.join(packageRoot(), "src/phases"), JSON.stringify(MODEL_RULES)];
  const { stdout: out } = await promisify(execFile)("/usr/bin/python3", [
    "-c",
    program,
    ...args,
    JSON.stringify(CORPUS.map((c) => c.config)),
  ]);

  return JSON.parse(out) as Array<{ auto_map: boolean; conv_ssm: boolean; inspect_conv_ssm: boolean }>;
}

describe("one auto_map test and one convolutional-SSM list for prepare and the runtime check", () => {
  it("hasAutoMap / isConvSsmConfig, check_runtime.py and inspect_runtime.py agree on every corpus config", async () => {
    const py = await pythonVerdicts();
    CORPUS.forEach((c, n) => {
      const want = { auto_map: c.auto_map, conv_ssm: c.conv_ssm };
      expect({ auto_map: hasAutoMap(c.config), conv_ssm: isConvSsmConfig(c.config) }, `TS: ${c.name}`).toEqual(want);
      expect(py[n], `python: ${c.name}`).toEqual({ ...want, inspect_conv_ssm: c.conv_ssm });
    });
  });

  it("readModelMeta reaches the same verdict from the files on a node (config.json and tokenizer_config.json)", async () => {
    for (const [n, c] of CORPUS.entries()) {
      const dir = path.join(tmp, `m${n}`);
      await mkdir(dir);
      await writeFile(path.join(dir, "config.json"), JSON.stringify(c.config));
      const meta = await readModelMeta(host, dir);
      expect({ auto_map: meta.auto_map, conv_ssm: meta.conv_ssm }, c.name).toEqual({
        auto_map: c.auto_map,
        conv_ssm: c.conv_ssm,
      });
      const tok = path.join(tmp, `t${n}`);
      await mkdir(tok);
      await writeFile(path.join(tok, "tokenizer_config.json"), JSON.stringify({ auto_map: c.config.auto_map }));
      expect((await readModelMeta(host, path.join(tmp, "m0"), tok)).auto_map, `tokenizer ${c.name}`).toBe(c.auto_map);
    }
  });
});
