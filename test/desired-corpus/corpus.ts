// The bad-input corpus: malformed desired trees as data. Every case starts from
// a valid two-engine tree (test/desired/fixtures.ts, or a running sim fleet's
// tree read back from disk) and breaks one thing, then names the issue that
// must come back: the file, the JSON path (or env-file line) and the message.
// Trees that break several things at once are in corpus-several.ts.
import { spawnSync } from "node:child_process";
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { envText, fleetEngine, rec, runtime, type DesiredTree, type Json, type Obj } from "../desired/fixtures.js";
import { E, F, L, node0, port1, r1, r2, type CorpusCase } from "./corpus-case.js";
import { NODE_CASES } from "./corpus-nodes.js";
import { HARDWARE_CASES } from "./corpus-hardware.js";
import { SEVERAL_MISTAKES } from "./corpus-several.js";
import { FILE_NAMES, fileText, writeDesired } from "./tree.js";

export { expectationOf, expectationsOf, expectsExactly, type CorpusCase, type Expect } from "./corpus-case.js";

/** An own, enumerable key even for "__proto__" (which `obj[k] = v` would turn into a prototype change). */
function ownKey(obj: Obj, key: string, value: Json): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** JSON nested `depth` levels deep. */
const nested = (depth: number, open: string, close: string, inner = "1") =>
  open.repeat(depth) + inner + close.repeat(depth);
const nestedObject = (depth: number): Json => {
  let v: Json = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
};

const engines = (t: DesiredTree) => t.launch["engines"] as Obj;
const envLines = (t: DesiredTree) => Object.keys(t.env).length;

/** A managed-flag case: `args` placed first in engine-1's extra_args. */
const flag = (name: string, args: string[], message: RegExp): CorpusCase => ({
  name: `extra_args overrides a launcher-managed flag: ${name}`,
  category: "launcher-managed flag",
  edit: (t) => {
    runtime(t, 1)["extra_args"] = [...args, "--max-model-len", "4096"];
  },
  expect: { file: L, path: r1(".runtime.extra_args[0]"), message },
});

/** Replace a desired file with a symlink to `target(dir)` after writing a valid copy there. */
const linkOut = (key: "fleet" | "launch" | "env", target: (dir: string) => Promise<string>) => async (dir: string) => {
  const file = join(dir, FILE_NAMES[key]);
  const to = await target(dir);
  await rm(file, { force: true });
  await symlink(to, file);
};
/** A directory beside the desired directory holding a valid copy of the file. */
const outsideCopy =
  (key: "fleet" | "launch" | "env", t: () => DesiredTree, relative: boolean) => async (dir: string) => {
    const name = `outside-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const out = join(dir, "..", name);
    await mkdir(out, { recursive: true });
    await writeFile(join(out, FILE_NAMES[key]), fileText(t(), key));
    return relative ? join("..", name, FILE_NAMES[key]) : join(out, FILE_NAMES[key]);
  };

export const CORPUS: CorpusCase[] = [
  // ── file level: empty, truncated, BOM, size, depth, encoding ──────────────
  {
    name: "empty fleet.json",
    category: "empty",
    raw: () => ({ fleet: "" }),
    expect: { file: F, path: "$", message: /is empty/ },
  },
  {
    name: "whitespace-only engine-launch.json",
    category: "empty",
    raw: () => ({ launch: " \n\t\n" }),
    expect: { file: L, path: "$", message: /is empty/ },
  },
  {
    name: "empty deployment.env",
    category: "empty",
    raw: () => ({ env: "" }),
    expect: { file: E, path: "$.NARWHAL_MODEL_DIR", message: /is required/ },
  },
  {
    name: "fleet.json cut in half",
    category: "truncated",
    raw: (t) => ({ fleet: JSON.stringify(t.fleet, null, 2).slice(0, 200) }),
    expect: { file: F, path: "$", message: /is truncated/ },
  },
  {
    name: "engine-launch.json cut inside a string",
    category: "truncated",
    raw: (t) => {
      const s = JSON.stringify(t.launch, null, 2);
      return { launch: s.slice(0, s.indexOf("CUDA_VISIBLE") + 4) };
    },
    expect: { file: L, path: "$", message: /is truncated/ },
  },
  {
    name: "deployment.env cut inside a quoted value",
    category: "truncated",
    raw: (t) => ({ env: envText(t.env) + 'NARWHAL_EXTRA="half a val' }),
    expect: (t) => ({
      file: E,
      path: "$.NARWHAL_EXTRA",
      message: new RegExp(`line ${envLines(t) + 1}: unterminated double quote`),
    }),
  },
  {
    name: "fleet.json with a UTF-8 BOM",
    category: "BOM",
    raw: (t) => ({ fleet: "\ufeff" + JSON.stringify(t.fleet) }),
    expect: { file: F, path: "$", message: /byte-order mark/ },
  },
  {
    name: "deployment.env with a UTF-8 BOM",
    category: "BOM",
    raw: (t) => ({ env: "\ufeff" + envText(t.env) }),
    expect: { file: E, path: "$", message: /byte-order mark/ },
  },
  {
    // The bound grows with the engines fleet.json lists (src/desired/size-caps.ts): 1 MiB + 8 KiB × 2 here.
    name: "engine-launch.json over its bound for two engines",
    category: "oversized",
    edit: (t) => {
      rec(t, 1)["sources"] = { padding: "x".repeat(1024 * 1024 + 16 * 1024) };
    },
    expect: [
      {
        file: L,
        path: "$",
        message: /^is \d+ bytes; the limit is 1064960 \(1 MiB \+ 8 KiB × 2 engines in fleet\.json\); shorten it$/,
      },
    ],
  },
  {
    name: "fleet.json over its bound for the engines it lists",
    category: "oversized",
    raw: (t) => ({ fleet: JSON.stringify(t.fleet).replace(/}$/, " ".repeat(1024 * 1024 + 16 * 1024) + "}") }),
    expect: [{ file: F, path: "$", message: /^is \d+ bytes; the limit is 1064960 \(1 MiB \+ 8 KiB × 2 engines/ }],
  },
  {
    // Only the size: an unread deployment.env defines nothing, and "required" issues would be its consequence.
    name: "deployment.env over 1 MiB",
    category: "oversized",
    raw: (t) => ({ env: envText(t.env) + "# " + "y".repeat(1024 * 1024) + "\n" }),
    expect: [{ file: E, path: "$", message: /^is \d+ bytes; the limit is 1048576 \(1 MiB\); shorten it$/ }],
  },
  {
    name: "fleet.json nested 33 objects deep",
    category: "deep",
    edit: (t) => {
      t.fleet["hardware"] = nestedObject(33);
    },
    expect: { file: F, path: "$", message: /deeper than 32 levels \(at line \d+ column \d+\)/ },
  },
  {
    name: "engine-launch.json nested 40 arrays deep",
    category: "deep",
    raw: (t) => ({
      launch: JSON.stringify(t.launch).replace('"extra_args":[', `"extra_args":[${nested(40, "[", "]")},`),
    }),
    expect: { file: L, path: "$", message: /deeper than 32 levels/ },
  },
  {
    name: "fleet.json that is not UTF-8",
    category: "encoding",
    raw: (t) => ({
      fleet: Buffer.concat([
        Buffer.from(JSON.stringify(t.fleet).slice(0, -1) + ', "x": "'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"}'),
      ]),
    }),
    expect: { file: F, path: "$", message: /not valid UTF-8/ },
  },
  {
    name: "NUL byte in deployment.env",
    category: "encoding",
    raw: (t) => ({ env: envText(t.env) + "NARWHAL_NOTE=a\0b\n" }),
    expect: (t) => ({ file: E, path: "$", message: new RegExp(`NUL byte at line ${envLines(t) + 1} column 15`) }),
  },
  {
    name: "\\u0000 in an extra_args string",
    category: "encoding",
    edit: (t) => {
      runtime(t, 1)["extra_args"] = ["--max-model-len\u0000", "4096"];
    },
    expect: { file: L, path: r1(".runtime.extra_args[0]"), message: /NUL character/ },
  },
  {
    name: "invalid JSON: trailing comma",
    category: "syntax",
    raw: (t) => ({ fleet: JSON.stringify(t.fleet, null, 2).replace(/\n}$/, ",\n}") }),
    expect: { file: F, path: "$", message: /not valid JSON at line \d+ column 1: unexpected "}"/ },
  },
  {
    name: "fleet.json holds an array",
    category: "syntax",
    raw: () => ({ fleet: "[]" }),
    expect: { file: F, path: "$", message: /expected object, received array/ },
  },
  {
    name: "engine-launch.json holds null",
    category: "syntax",
    raw: () => ({ launch: "null" }),
    expect: { file: L, path: "$", message: /expected object/ },
  },
  {
    name: "engine-1 given twice in engine-launch.json",
    category: "duplicate key",
    raw: (t) => {
      const s = JSON.stringify(t.launch, null, 2);
      const one = JSON.stringify(rec(t, 1));
      return { launch: s.replace('"engines": {', `"engines": {\n    "engine-1": ${one},`) };
    },
    expect: { file: L, path: r1(), message: /given twice in one object \(at line 3 column 5 and line 4 column 5\)/ },
  },
  {
    name: "hardware.accelerator given twice in fleet.json",
    category: "duplicate key",
    raw: (t) => ({
      fleet: JSON.stringify(t.fleet).replace('"hardware":{', '"hardware":{"accelerator":"AMD Instinct MI300X",'),
    }),
    expect: { file: F, path: "$.hardware.accelerator", message: /given twice/ },
  },

  // ── keys that could reach a prototype ─────────────────────────────────────
  {
    name: "__proto__ at the top of fleet.json",
    category: "prototype key",
    edit: (t) => ownKey(t.fleet, "__proto__", { polluted: true }),
    expect: { file: F, path: "$.__proto__", message: /not allowed \(it could alter object prototypes\)/ },
  },
  {
    name: "__proto__ in a launch record",
    category: "prototype key",
    edit: (t) => ownKey(rec(t, 1), "__proto__", { role: "x" }),
    expect: { file: L, path: r1(".__proto__"), message: /not allowed/ },
  },
  {
    name: "constructor in runtime.environment",
    category: "prototype key",
    edit: (t) => ownKey(runtime(t, 2)["environment"] as Obj, "constructor", "x"),
    expect: { file: L, path: r2(".runtime.environment.constructor"), message: /not allowed/ },
  },
  {
    name: "prototype in a fleet engine record",
    category: "prototype key",
    edit: (t) => ownKey(fleetEngine(t, 1), "prototype", {}),
    expect: { file: F, path: "$.engines[1].prototype", message: /not allowed/ },
  },
  {
    name: "__proto__ inside an array element",
    category: "prototype key",
    edit: (t) => {
      const o: Obj = {};
      ownKey(o, "__proto__", { polluted: 1 });
      runtime(t, 1)["extra_args"] = [o];
    },
    expect: { file: L, path: r1(".runtime.extra_args[0].__proto__"), message: /not allowed/ },
  },
  {
    name: "constructor in a node record",
    category: "prototype key",
    edit: (t) => ownKey(node0(t), "constructor", { prototype: 1 }),
    expect: { file: F, path: "$.nodes[0].constructor", message: /not allowed/ },
  },
  {
    name: "__proto__ as a deployment.env variable",
    category: "prototype key",
    raw: (t) => ({ env: envText(t.env) + "__proto__=x\n" }),
    expect: { file: E, path: "$.__proto__", message: /not allowed as a variable name/ },
  },

  // ── unknown fields and wrong types ────────────────────────────────────────
  {
    name: "unknown field in a launch record",
    category: "unknown field",
    edit: (t) => {
      rec(t, 1)["gpus"] = 1;
    },
    expect: { file: L, path: r1(".gpus"), message: /unknown field "gpus"/ },
  },
  {
    // It becomes part of container names (narwhal-<name>-engine-<k>): a DNS-label-like word.
    name: "fleet name with upper case and an underscore",
    category: "odd name",
    edit: (t) => {
      t.fleet["name"] = "Prod_A";
    },
    expect: [
      {
        file: F,
        path: "$.name",
        message: /must be 1-32 lower-case letters, digits and inner hyphens, such as prod-a/,
      },
    ],
  },
  {
    name: "unknown top-level field in fleet.json",
    category: "unknown field",
    edit: (t) => {
      t.fleet["version"] = 2;
    },
    expect: { file: F, path: "$.version", message: /unknown field "version"/ },
  },
  {
    name: "misspelt runtime field",
    category: "unknown field",
    edit: (t) => {
      runtime(t, 2)["extra_arg"] = [];
    },
    expect: {
      file: L,
      path: r2(".runtime.extra_arg"),
      message: /unknown field "extra_arg"; did you mean "extra_args"\?/,
    },
  },
  {
    name: "unknown field one edit from a known one",
    category: "unknown field",
    edit: (t) => {
      rec(t, 1)["gpu_id"] = ["0"];
    },
    expect: { file: L, path: r1(".gpu_id"), message: /unknown field "gpu_id"; did you mean "gpu_ids"\?/ },
  },
  {
    name: "misspelt node field",
    category: "unknown field",
    edit: (t) => {
      node0(t)["sysfs_rot"] = "/sys";
    },
    expect: {
      file: F,
      path: "$.nodes[0].sysfs_rot",
      message: /unknown field "sysfs_rot"; did you mean "sysfs_root"\?/,
    },
  },
  {
    name: "required field missing in a launch record",
    category: "unknown field",
    edit: (t) => {
      delete rec(t, 2)["gpu_visibility_env"];
    },
    expect: {
      file: L,
      path: r2(".gpu_visibility_env"),
      message:
        /^required field "gpu_visibility_env" is missing \("CUDA_VISIBLE_DEVICES" or "ROCR_VISIBLE_DEVICES"\): Variable the launcher exports gpu_ids through; add it$/,
    },
  },
  {
    name: "required field missing in fleet hardware",
    category: "unknown field",
    edit: (t) => {
      delete (t.fleet["hardware"] as Obj)["accelerator"];
    },
    expect: {
      file: F,
      path: "$.hardware.accelerator",
      message:
        /^required field "accelerator" is missing \(a string\): Accelerator product every engine uses, as host inspection reports it; add it$/,
    },
  },
  {
    name: "unknown hardware field",
    category: "unknown field",
    edit: (t) => {
      (t.fleet["hardware"] as Obj)["gpus_per_engine"] = 1;
    },
    expect: { file: F, path: "$.hardware.gpus_per_engine", message: /unknown field/ },
  },
  {
    name: "tensor_parallel_size as a string",
    category: "wrong type",
    edit: (t) => {
      rec(t, 1)["tensor_parallel_size"] = "1";
    },
    expect: { file: L, path: r1(".tensor_parallel_size"), message: /expected number/ },
  },
  {
    name: "gpu_ids as a string",
    category: "wrong type",
    edit: (t) => {
      rec(t, 1)["gpu_ids"] = "0";
    },
    expect: { file: L, path: r1(".gpu_ids"), message: /expected array/ },
  },
  {
    name: "fleet engines as an object",
    category: "wrong type",
    edit: (t) => {
      t.fleet["engines"] = { n1: {} };
    },
    expect: { file: F, path: "$.engines", message: /expected array/ },
  },
  {
    name: "role as a number",
    category: "wrong type",
    edit: (t) => {
      fleetEngine(t, 0)["role"] = 7;
    },
    expect: { file: F, path: "$.engines[0].role", message: /expected string/ },
  },
  {
    name: "a number in extra_args",
    category: "wrong type",
    edit: (t) => {
      runtime(t, 2)["extra_args"] = ["--max-model-len", 4096];
    },
    expect: { file: L, path: r2(".runtime.extra_args[1]"), message: /expected string/ },
  },
  {
    name: "fractional hardware.tensor_parallel",
    category: "wrong type",
    edit: (t) => {
      (t.fleet["hardware"] as Obj)["tensor_parallel"] = 1.5;
    },
    expect: { file: F, path: "$.hardware.tensor_parallel", message: /expected int/ },
  },
  {
    name: "negative block_size",
    category: "wrong type",
    edit: (t) => {
      runtime(t, 1)["block_size"] = -16;
    },
    expect: { file: L, path: r1(".runtime.block_size"), message: /Too small/ },
  },
  {
    name: "block_size 1e400 (Infinity)",
    category: "wrong type",
    raw: (t) => ({ launch: JSON.stringify(t.launch).replace('"block_size":16', '"block_size":1e400') }),
    expect: { file: L, path: r1(".runtime.block_size"), message: /expected number, received Infinity/ },
  },
  {
    name: "fractional GPU id",
    category: "wrong type",
    edit: (t) => {
      rec(t, 1)["gpu_ids"] = [1.5];
    },
    expect: { file: L, path: r1(".gpu_ids[0]"), message: /must be a GPU index/ },
  },
  {
    name: "boolean GPU id",
    category: "wrong type",
    edit: (t) => {
      rec(t, 1)["gpu_ids"] = [true];
    },
    expect: { file: L, path: r1(".gpu_ids[0]"), message: /must be a GPU index/ },
  },
  {
    name: "negative GPU id",
    category: "wrong type",
    edit: (t) => {
      rec(t, 2)["gpu_ids"] = [-1];
    },
    expect: { file: L, path: r2(".gpu_ids[0]"), message: /Too small|GPU index/ },
  },
  {
    name: "null GPU id",
    category: "wrong type",
    edit: (t) => {
      rec(t, 2)["gpu_ids"] = [null];
    },
    expect: { file: L, path: r2(".gpu_ids[0]"), message: /must be a GPU index/ },
  },

  // ── names: traversal, absolute, odd ───────────────────────────────────────
  {
    name: "engine key with ../",
    category: "odd name",
    edit: (t) => {
      engines(t)["engine-../1"] = rec(t, 1);
    },
    expect: {
      file: L,
      path: '$.engines["engine-../1"]',
      message: /key "engine-\.\.\/1" is not allowed: engine names are "engine-<k>"/,
    },
  },
  {
    name: "absolute path as engine key",
    category: "odd name",
    edit: (t) => {
      engines(t)["/etc/passwd"] = rec(t, 2);
    },
    expect: { file: L, path: '$.engines["/etc/passwd"]', message: /engine names are/ },
  },
  {
    name: "engine-0",
    category: "odd name",
    edit: (t) => {
      engines(t)["engine-0"] = rec(t, 2);
    },
    expect: { file: L, path: '$.engines["engine-0"]', message: /engine names are/ },
  },
  {
    name: "engine-01 (leading zero)",
    category: "odd name",
    edit: (t) => {
      engines(t)["engine-01"] = rec(t, 2);
    },
    expect: { file: L, path: '$.engines["engine-01"]', message: /engine names are/ },
  },
  {
    name: "engine index beyond 9999 (rounds as a number)",
    category: "odd name",
    edit: (t) => {
      engines(t)["engine-99999999999999999999"] = rec(t, 2);
      delete engines(t)["engine-2"];
    },
    expect: [{ file: L, path: '$.engines["engine-99999999999999999999"]', message: /1 ≤ k ≤ 9999/ }],
  },
  {
    name: "iid with ../",
    category: "odd name",
    edit: (t) => {
      fleetEngine(t, 0)["iid"] = "../n1";
    },
    expect: [{ file: F, path: "$.engines[0].iid", message: /must be "n<k>"/ }],
  },
  {
    name: "iid with a path inside",
    category: "odd name",
    edit: (t) => {
      fleetEngine(t, 1)["iid"] = "n1/../2";
    },
    expect: { file: F, path: "$.engines[1].iid", message: /must be "n<k>"/ },
  },
  {
    name: "node name with ../",
    category: "odd name",
    edit: (t) => {
      node0(t)["name"] = "../gpu-a";
    },
    expect: { file: F, path: "$.nodes[0].name", message: /must be a host name/ },
  },
  {
    name: "node lists an absolute path",
    category: "odd name",
    edit: (t) => {
      node0(t)["engines"] = ["/n1", "n2"];
    },
    expect: { file: F, path: "$.nodes[0].engines[0]", message: /must be an iid/ },
  },

  // ── the files themselves: symlinks out of the tree, directories, pipes ───
  {
    name: "fleet.json symlinked to an absolute path outside the tree",
    category: "symlink",
    after: (dir, t) =>
      linkOut(
        "fleet",
        outsideCopy("fleet", () => t, false),
      )(dir),
    expect: { file: F, path: "$", message: /symbolic link to .*, outside the desired directory/ },
  },
  {
    name: "engine-launch.json symlinked through ../",
    category: "symlink",
    after: (dir, t) =>
      linkOut(
        "launch",
        outsideCopy("launch", () => t, true),
      )(dir),
    expect: { file: L, path: "$", message: /symbolic link to \.\.\/.*, outside the desired directory/ },
  },
  {
    name: "deployment.env symlinked to /etc/passwd",
    category: "symlink",
    after: linkOut("env", async () => "/etc/passwd"),
    expect: { file: E, path: "$", message: /symbolic link to \/etc\/passwd, outside/ },
  },
  {
    name: "dangling symlink",
    category: "symlink",
    after: linkOut("fleet", async () => "./no-such-fleet.json"),
    expect: { file: F, path: "$", message: /which does not exist/ },
  },
  {
    name: "symlink loop",
    category: "symlink",
    after: linkOut("launch", async () => FILE_NAMES.launch),
    expect: { file: L, path: "$", message: /cannot be resolved \(ELOOP\)/ },
  },
  {
    name: "fleet.json is a directory",
    category: "not a file",
    after: async (dir) => {
      await rm(join(dir, F));
      await mkdir(join(dir, F));
    },
    expect: { file: F, path: "$", message: /is a directory, not a regular file/ },
  },
  {
    name: "engine-launch.json is a named pipe",
    category: "not a file",
    after: async (dir) => {
      await rm(join(dir, L));
      spawnSync("mkfifo", [join(dir, L)]);
    },
    expect: { file: L, path: "$", message: /is a named pipe/ },
  },

  // ── cross-record rules ────────────────────────────────────────────────────
  {
    name: "two engines on one host share a GPU",
    category: "duplicate GPU",
    edit: (t) => {
      rec(t, 2)["gpu_ids"] = [...(rec(t, 1)["gpu_ids"] as Json[])];
      rec(t, 2)["accelerator_devices"] = [...(rec(t, 1)["accelerator_devices"] as Json[])];
    },
    expect: { file: L, path: r2(".gpu_ids[0]"), message: /already allocated to engine-1/ },
  },
  {
    name: "one GPU twice in a record",
    category: "duplicate GPU",
    edit: (t) => {
      const g = (rec(t, 1)["gpu_ids"] as Json[])[0] as Json;
      rec(t, 1)["gpu_ids"] = [g, g];
      rec(t, 1)["tensor_parallel_size"] = 2;
    },
    expect: { file: L, path: r1(".gpu_ids[1]"), message: /is selected twice/ },
  },
  {
    name: "duplicate HTTP port on a host",
    category: "duplicate port",
    edit: (t) => {
      t.env["NARWHAL_NODE_2_ENGINE_PORT"] = port1(t, "ENGINE_PORT", "NARWHAL_ENGINE_PORT");
    },
    expect: {
      file: F,
      path: "$.engines[1].url",
      message: /engine-2 HTTP port \d+ on node \S+ is already planned for engine-1 HTTP/,
    },
  },
  {
    name: "duplicate attestation port on a host",
    category: "duplicate port",
    edit: (t) => {
      t.env["NARWHAL_NODE_2_ATTEST_PORT"] = port1(t, "ATTEST_PORT", "NARWHAL_ATTEST_PORT");
    },
    expect: {
      file: F,
      path: "$.engines[1].attestation_url",
      message: /attestation port \d+ .* already planned for engine-1 attestation/,
    },
  },
  {
    name: "duplicate NIXL side-channel port on a host",
    category: "duplicate port",
    edit: (t) => {
      t.env["NARWHAL_NODE_2_NIXL_PORT"] = port1(t, "NIXL_PORT", "NARWHAL_NIXL_PORT");
    },
    expect: {
      file: E,
      path: "$.NARWHAL_NODE_2_NIXL_PORT",
      message: /NIXL side-channel .* already planned for engine-1 NIXL/,
    },
  },
  {
    name: "attestation port equals another engine's HTTP port",
    category: "duplicate port",
    edit: (t) => {
      t.env["NARWHAL_NODE_2_ATTEST_PORT"] = port1(t, "ENGINE_PORT", "NARWHAL_ENGINE_PORT");
    },
    expect: { file: F, path: "$.engines[1].attestation_url", message: /already planned for engine-1 HTTP/ },
  },
  {
    name: "TP size differs from the GPU count",
    category: "TP mismatch",
    edit: (t) => {
      rec(t, 1)["tensor_parallel_size"] = 2;
    },
    expect: { file: L, path: r1(".tensor_parallel_size"), message: /tensor_parallel_size is 2 but gpu_ids selects 1/ },
  },
  {
    name: "fleet hardware.tensor_parallel differs",
    category: "TP mismatch",
    edit: (t) => {
      (t.fleet["hardware"] as Obj)["tensor_parallel"] = 4;
    },
    expect: { file: F, path: "$.hardware.tensor_parallel", message: /is 4 but engine-1 has tensor_parallel_size 1/ },
  },
  {
    name: "accelerator differs from the fleet's",
    category: "hardware",
    edit: (t) => {
      rec(t, 2)["accelerator"] = "NVIDIA A100";
    },
    expect: { file: L, path: r2(".accelerator"), message: /differs from fleet.json hardware.accelerator/ },
  },

  // ── ${VAR} substitution ───────────────────────────────────────────────────
  {
    name: "undefined ${VAR}",
    category: "substitution",
    edit: (t) => {
      (runtime(t, 1)["environment"] as Obj)["NCCL_DEBUG"] = "${NARWHAL_NOT_DEFINED}";
    },
    expect: {
      file: L,
      path: r1(".runtime.environment.NCCL_DEBUG"),
      message: /variable NARWHAL_NOT_DEFINED is not defined in deployment.env/,
    },
  },
  {
    name: "misspelt ${VAR}",
    category: "substitution",
    edit: (t) => {
      (rec(t, 2)["transfer"] as Obj)["net_devices"] = ["${NARWHAL_FABRIC_INTERFAC}"];
    },
    expect: {
      file: L,
      path: r2(".transfer.net_devices[0]"),
      message:
        /variable NARWHAL_FABRIC_INTERFAC is not defined in deployment\.env \(did you mean NARWHAL_FABRIC_INTERFACE\?\)/,
    },
  },
  {
    name: "URL variable of a node without an IP",
    category: "substitution",
    edit: (t) => {
      delete t.env["NARWHAL_NODE_2_IP"];
    },
    expect: {
      file: F,
      path: "$.engines[1].url",
      message: /NARWHAL_NODE_2_URL is not defined .*NARWHAL_NODE_2_IP, which is not set/,
    },
  },
  {
    name: "${VAR} embedded in other text",
    category: "substitution",
    edit: (t) => {
      fleetEngine(t, 0)["url"] = "http://${NARWHAL_NODE_1_IP}:8000";
    },
    expect: { file: F, path: "$.engines[0].url", message: /embeds \$\{\.\.\.\} in other text/ },
  },
  {
    name: "the API key substituted into a record",
    category: "substitution",
    edit: (t) => {
      (runtime(t, 2)["environment"] as Obj)["MY_KEY"] = "${NARWHAL_ENGINE_API_KEY}";
    },
    expect: { file: L, path: r2(".runtime.environment.MY_KEY"), message: /is a secret/ },
  },

  // ── launcher-managed flags and environment ────────────────────────────────
  flag("--port", ["--port", "9000"], /--port is set by the launcher/),
  flag("--port=1", ["--port=1"], /--port is set by the launcher/),
  flag("--tensor_parallel_size", ["--tensor_parallel_size", "2"], /--tensor-parallel-size is set by the launcher/),
  flag("-tp", ["-tp", "2"], /-tp is set by the launcher/),
  flag("--api-key", ["--api-key", "sk-other"], /--api-key is set by the launcher/),
  flag("--kv-transfer-config", ["--kv-transfer-config", "{}"], /--kv-transfer-config is set by the launcher/),
  flag(
    "--kv-transfer-config.kv_role (dotted JSON key)",
    ["--kv-transfer-config.kv_role", "kv_producer"],
    /sets part of --kv-transfer-config/,
  ),
  flag("--tensor-parallel (abbreviation)", ["--tensor-parallel", "2"], /abbreviates --tensor-parallel-size/),
  flag("--served-model=x (abbreviation)", ["--served-model=x"], /abbreviates --served-model-name/),
  flag("--config file.yaml", ["--config", "/tmp/args.yaml"], /--config loads vLLM arguments from a file/),
  {
    name: "runtime.environment sets CUDA_VISIBLE_DEVICES",
    category: "launcher-managed env",
    edit: (t) => {
      (runtime(t, 1)["environment"] as Obj)["CUDA_VISIBLE_DEVICES"] = "0,1";
    },
    expect: { file: L, path: r1(".runtime.environment.CUDA_VISIBLE_DEVICES"), message: /set by the launcher/ },
  },
  {
    name: "runtime.environment sets VLLM_API_KEY",
    category: "launcher-managed env",
    edit: (t) => {
      (runtime(t, 2)["environment"] as Obj)["VLLM_API_KEY"] = "x";
    },
    expect: { file: L, path: r2(".runtime.environment.VLLM_API_KEY"), message: /set by the launcher/ },
  },

  // ── accelerator, transport, backend, model ────────────────────────────────
  {
    name: "ROCm without /dev/kfd",
    category: "devices",
    edit: (t) => {
      rec(t, 1)["gpu_visibility_env"] = "ROCR_VISIBLE_DEVICES";
      rec(t, 1)["accelerator_devices"] = ["/dev/dri/renderD128"];
    },
    expect: { file: L, path: r1(".accelerator_devices"), message: /need \/dev\/kfd/ },
  },
  {
    name: "RDMA without transfer devices",
    category: "devices",
    edit: (t) => {
      (rec(t, 2)["transfer"] as Obj)["transport"] = "ucx_rdma";
    },
    expect: { file: L, path: r2(".transfer.devices"), message: /ucx_rdma needs its RDMA character devices/ },
  },
  {
    name: "a device path with a newline",
    category: "devices",
    edit: (t) => {
      rec(t, 1)["accelerator_devices"] = ["/dev/nvidia0\n/dev/mem"];
    },
    expect: { file: L, path: r1(".accelerator_devices[0]"), message: /control characters/ },
  },
  {
    name: "container backend without image",
    category: "backend",
    edit: (t) => {
      rec(t, 1)["backend"] = "container";
      delete rec(t, 1)["image"];
    },
    expect: { file: L, path: r1(".image"), message: /the container backend needs image/ },
  },
  {
    // Seed 000 compares the image's id with NARWHAL_ENGINE_IMAGE: a mutable tag is not an identity.
    name: "container image given as a tag",
    category: "backend",
    edit: (t) => {
      rec(t, 1)["backend"] = "container";
      rec(t, 1)["image"] = "vllm/vllm-openai:latest";
    },
    expect: { file: L, path: r1(".image"), message: /image "vllm\/vllm-openai:latest" is a tag/ },
  },
  {
    // vLLM's NixlConnector refuses the handshake: the compatibility hash includes vllm.__version__.
    name: "the only prefill and decode pin different vLLM versions",
    category: "NIXL compatibility",
    edit: (t) => {
      (runtime(t, 2)["expected_packages"] as Obj)["vllm"] = "0.11.1";
    },
    expect: {
      file: L,
      path: r2(),
      message: /vllm_version "0\.11\.0" vs "0\.11\.1" \(runtime\.expected_packages\.vllm\)/,
    },
  },
  {
    // The same checkpoint, two --model strings: "/model" in the container, the host path natively.
    name: "a native prefill beside a container decode hashes another --model string",
    category: "NIXL compatibility",
    edit: (t) => {
      rec(t, 1)["backend"] = "native";
      delete rec(t, 1)["image"];
    },
    expect: {
      file: L,
      path: r2(),
      message: /no prefill\/decode pair has equal NIXL compatibility inputs.*model ".*" vs "\/model"/,
    },
  },
  {
    name: "native backend without NARWHAL_MODEL_REVISION",
    category: "backend",
    edit: (t) => {
      rec(t, 2)["backend"] = "native";
      delete t.env["NARWHAL_MODEL_REVISION"];
    },
    expect: { file: E, path: "$.NARWHAL_MODEL_REVISION", message: /requires NARWHAL_MODEL_REVISION/ },
  },
  {
    name: "upper-case model sha256",
    category: "model",
    edit: (t) => {
      t.env["NARWHAL_MODEL_CONFIG_SHA256"] = "A".repeat(64);
    },
    expect: { file: E, path: "$.NARWHAL_MODEL_CONFIG_SHA256", message: /is not a sha256/ },
  },
  {
    name: "short model sha256",
    category: "model",
    edit: (t) => {
      t.env["NARWHAL_MODEL_CONFIG_SHA256"] = "abc123";
    },
    expect: { file: E, path: "$.NARWHAL_MODEL_CONFIG_SHA256", message: /64 lower-case hex digits/ },
  },

  // ── addresses, URLs and ports ─────────────────────────────────────────────
  {
    name: "IPv4 octet over 255",
    category: "address",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_IP"] = "10.0.0.300";
    },
    expect: {
      file: F,
      path: "$.engines[0].url",
      message: /NARWHAL_NODE_1_IP="10\.0\.0\.300", which is not an IP address/,
    },
  },
  {
    name: "three-part IPv4 (read as another address)",
    category: "address",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_IP"] = "10.0.3";
    },
    expect: { file: F, path: "$.engines[0].url", message: /not an IP address/ },
  },
  {
    name: "IP with a port",
    category: "address",
    edit: (t) => {
      t.env["NARWHAL_NODE_2_IP"] = "10.0.0.11:8000";
    },
    expect: {
      file: F,
      path: "$.engines[1].attestation_url",
      message: /NARWHAL_NODE_2_IP="10\.0\.0\.11:8000", which is not an IP address/,
    },
  },
  {
    name: "short-form IPv4 in an explicit URL",
    category: "address",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_URL"] = "http://127.1:18000";
    },
    expect: { file: F, path: "$.engines[0].url", message: /host "127\.1" is read as 127\.0\.0\.1/ },
  },
  {
    name: "IPv6 without brackets in an explicit URL",
    category: "address",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_URL"] = "http://fd00::1:8000";
    },
    expect: { file: F, path: "$.engines[0].url", message: /is not a URL/ },
  },
  {
    name: "engine URL with a path",
    category: "address",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_URL"] = "http://10.0.0.11:8000/v1";
    },
    expect: { file: F, path: "$.engines[0].url", message: /must not have a path/ },
  },
  {
    name: "engine URL with credentials",
    category: "address",
    edit: (t) => {
      fleetEngine(t, 1)["url"] = "http://user:pw@10.0.0.11:8001";
    },
    expect: { file: F, path: "$.engines[1].url", message: /must not carry credentials/ },
  },
  {
    name: "ftp:// engine URL",
    category: "address",
    edit: (t) => {
      fleetEngine(t, 1)["attestation_url"] = "ftp://10.0.0.11:8011/";
    },
    expect: { file: F, path: "$.engines[1].attestation_url", message: /must use http/ },
  },
  {
    name: "engine URL with a tab",
    category: "address",
    edit: (t) => {
      fleetEngine(t, 1)["url"] = "http://10.0.0.11:80\t01";
    },
    expect: { file: F, path: "$.engines[1].url", message: /whitespace or control characters/ },
  },
  {
    name: "port 0",
    category: "port",
    edit: (t) => {
      t.env["NARWHAL_ENGINE_PORT"] = "0";
    },
    expect: { file: E, path: "$.NARWHAL_ENGINE_PORT", message: /must be an integer port 1\.\.65535/ },
  },
  {
    name: "port 70000",
    category: "port",
    edit: (t) => {
      t.env["NARWHAL_NODE_2_ATTEST_PORT"] = "70000";
    },
    expect: { file: E, path: "$.NARWHAL_NODE_2_ATTEST_PORT", message: /integer port 1\.\.65535/ },
  },
  {
    name: 'port "80a"',
    category: "port",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_NIXL_PORT"] = "80a";
    },
    expect: { file: E, path: "$.NARWHAL_NODE_1_NIXL_PORT", message: /integer port/ },
  },
  {
    name: "bad transfer port list",
    category: "port",
    edit: (t) => {
      t.env["NARWHAL_TRANSFER_PORTS"] = "7000,x,70000";
    },
    expect: { file: E, path: "$.NARWHAL_TRANSFER_PORTS", message: /lists x, 70000/ },
  },

  // ── deployment.env syntax and values ──────────────────────────────────────
  {
    name: "env line without =",
    category: "env syntax",
    raw: (t) => ({ env: envText(t.env) + "JUST_A_WORD\n" }),
    expect: (t) => ({ file: E, path: `line ${envLines(t) + 1}`, message: /expected KEY=VALUE/ }),
  },
  {
    name: "env spaces around =",
    category: "env syntax",
    raw: (t) => ({ env: envText(t.env) + "NARWHAL_X = 1\n" }),
    expect: (t) => ({ file: E, path: `line ${envLines(t) + 1}`, message: /is not a variable name/ }),
  },
  {
    name: "env command substitution",
    category: "env syntax",
    raw: (t) => ({ env: envText(t.env) + "NARWHAL_X=$(id)\n" }),
    expect: { file: E, path: "$.NARWHAL_X", message: /quote it/ },
  },
  {
    name: "env text after a closing quote",
    category: "env syntax",
    raw: (t) => ({ env: envText(t.env) + "NARWHAL_X='a'b\n" }),
    expect: { file: E, path: "$.NARWHAL_X", message: /unexpected text after the closing quote/ },
  },
  {
    name: "env key set twice",
    category: "duplicate env key",
    raw: (t) => ({ env: envText(t.env) + "NARWHAL_MODEL_DIR=/elsewhere\n" }),
    expect: { file: E, path: "$.NARWHAL_MODEL_DIR", message: /already set on line \d+/ },
  },
  {
    name: "newline in a runtime.environment value",
    category: "newline",
    edit: (t) => {
      (runtime(t, 1)["environment"] as Obj)["NCCL_DEBUG"] = "WARN\nVLLM_API_KEY=stolen";
    },
    expect: { file: L, path: r1(".runtime.environment.NCCL_DEBUG"), message: /must be a single line/ },
  },
  {
    name: "carriage return in a runtime.environment value",
    category: "newline",
    edit: (t) => {
      (runtime(t, 2)["environment"] as Obj)["X"] = "a\rb";
    },
    expect: { file: L, path: r2(".runtime.environment.X"), message: /single line/ },
  },
  {
    name: "newline in the API key (\\n escape)",
    category: "newline",
    raw: (t) => ({ env: envText({ ...t.env, NARWHAL_ENGINE_API_KEY: '"k-1\\nVLLM_X=1"' }) }),
    expect: { file: E, path: "$.NARWHAL_ENGINE_API_KEY", message: /contains a line break/ },
  },
  {
    name: "newline reaching an environment value through ${VAR}",
    category: "newline",
    raw: (t) => ({ env: envText({ ...t.env, NARWHAL_NCCL: '"INFO\\nX=1"' }) }),
    edit: (t) => {
      (runtime(t, 1)["environment"] as Obj)["NCCL_DEBUG"] = "${NARWHAL_NCCL}";
    },
    expect: { file: L, path: r1(".runtime.environment.NCCL_DEBUG"), message: /single line/ },
  },
  {
    name: "space in a net device",
    category: "newline",
    edit: (t) => {
      (rec(t, 1)["transfer"] as Obj)["net_devices"] = ["eth0 eth1"];
    },
    expect: { file: L, path: r1(".transfer.net_devices[0]"), message: /without spaces/ },
  },
  {
    name: "NARWHAL_READY_SECONDS 0",
    category: "env value",
    edit: (t) => {
      t.env["NARWHAL_READY_SECONDS"] = "0";
    },
    expect: { file: E, path: "$.NARWHAL_READY_SECONDS", message: /positive whole number/ },
  },
  {
    name: "misspelt deployment variable",
    category: "env value",
    edit: (t) => {
      t.env["NARWHAL_READY_SECOND"] = "600";
    },
    expect: {
      file: E,
      path: "$.NARWHAL_READY_SECOND",
      message: /NARWHAL_READY_SECOND is not a variable narwhal reads .*did you mean NARWHAL_READY_SECONDS\?/,
    },
  },
  {
    name: "misspelt per-node variable",
    category: "env value",
    edit: (t) => {
      t.env["NARWHAL_NODE_1_ATTEST_PORTS"] = "8010";
    },
    expect: { file: E, path: "$.NARWHAL_NODE_1_ATTEST_PORTS", message: /did you mean NARWHAL_NODE_1_ATTEST_PORT\?/ },
  },
  {
    name: "required variable missing",
    category: "env value",
    edit: (t) => {
      delete t.env["NARWHAL_ENGINE_MODEL_NAME"];
    },
    expect: { file: E, path: "$.NARWHAL_ENGINE_MODEL_NAME", message: /is required/ },
  },

  // ── pairing and placement ─────────────────────────────────────────────────
  {
    name: "fleet record without a launch record",
    category: "pairing",
    edit: (t) => {
      delete engines(t)["engine-2"];
    },
    expect: { file: F, path: "$.engines[1].iid", message: /n2 has no launch record engine-2/ },
  },
  {
    name: "launch record without a fleet record",
    category: "pairing",
    edit: (t) => {
      engines(t)["engine-3"] = { ...rec(t, 2), gpu_ids: ["7"], accelerator_devices: ["/dev/nvidia7"] };
    },
    expect: { file: L, path: '$.engines["engine-3"]', message: /engine-3 has no fleet record with iid n3/ },
  },
  {
    name: "engine on two nodes",
    category: "placement",
    edit: (t) => {
      (t.fleet["nodes"] as Obj[]).push({ ...node0(t), name: "gpu-b", engines: ["n2"] });
    },
    expect: { file: F, path: "$.nodes[1].engines[0]", message: /n2 is already on node/ },
  },
  {
    name: "engine on no node",
    category: "placement",
    edit: (t) => {
      node0(t)["engines"] = ["n1"];
    },
    expect: { file: F, path: "$.engines[1]", message: /n2 is on no node/ },
  },
  {
    name: "node lists an unknown iid",
    category: "placement",
    edit: (t) => {
      node0(t)["engines"] = ["n1", "n2", "n9"];
    },
    expect: { file: F, path: "$.nodes[0].engines[2]", message: /lists n9, which is not in engines/ },
  },
  {
    name: "iid used twice",
    category: "pairing",
    edit: (t) => {
      fleetEngine(t, 1)["iid"] = "n1";
    },
    expect: { file: F, path: "$.engines[1].iid", message: /iid n1 is used by more than one engine/ },
  },
  {
    name: "role differs between fleet and launch record",
    category: "pairing",
    edit: (t) => {
      rec(t, 2)["role"] = "prefill";
    },
    expect: { file: L, path: r2(".role"), message: /differs from the fleet record n2/ },
  },
  {
    name: "derived environment disagrees",
    category: "derived",
    edit: (t) => {
      rec(t, 1)["environment"] = { CUDA_VISIBLE_DEVICES: "5", UCX_NET_DEVICES: "lo" };
    },
    expect: { file: L, path: r1(".environment"), message: /environment is derived/ },
  },

  {
    name: "no engines at all",
    category: "empty",
    edit: (t) => {
      t.launch["engines"] = {};
    },
    expect: [{ file: L, path: "$.engines", message: /list at least one engine/ }],
  },
  {
    name: "no nodes",
    category: "empty",
    edit: (t) => {
      t.fleet["nodes"] = [];
    },
    expect: [{ file: F, path: "$.nodes", message: /list at least one node/ }],
  },

  // ── rollout block (fleet.json) ────────────────────────────────────────────
  {
    name: "rollout max_unavailable 0",
    category: "rollout",
    edit: (t) => {
      t.fleet["rollout"] = { max_unavailable: { decode: 0 } };
    },
    expect: {
      file: F,
      path: "$.rollout.max_unavailable.decode",
      message: /must be at least 1: with none allowed out of service/,
    },
  },
  {
    name: "rollout percentage over 100",
    category: "rollout",
    edit: (t) => {
      t.fleet["rollout"] = { default_max_unavailable: "150%" };
    },
    expect: { file: F, path: "$.rollout.default_max_unavailable", message: /percentage "1%" to "100%"/ },
  },
  {
    name: "kv_transfer policy misspelt",
    category: "kv transfer",
    edit: (t) => {
      t.fleet["kv_transfer"] = { on_failure: "restart" };
    },
    expect: { file: F, path: "$.kv_transfer.on_failure", message: /"restart_decode"\|"hold"/ },
  },
  {
    name: "kv_transfer negative restarts",
    category: "kv transfer",
    edit: (t) => {
      t.fleet["kv_transfer"] = { max_decode_restarts: -1 };
    },
    expect: { file: F, path: "$.kv_transfer.max_decode_restarts", message: /must be 0 \(never restart\) or more/ },
  },
  {
    name: "rollout rule misspelt",
    category: "rollout",
    edit: (t) => {
      t.fleet["rollout"] = { incompatible: "pd_unit" };
    },
    expect: { file: F, path: "$.rollout.incompatible", message: /"pd_units"\|"recreate"/ },
  },
  {
    name: "rollout role no engine has",
    category: "rollout",
    edit: (t) => {
      t.fleet["rollout"] = { max_unavailable: { decoder: 1 } };
    },
    expect: {
      file: F,
      path: "$.rollout.max_unavailable.decoder",
      message: /no engine has role "decoder"; did you mean "decode"\?/,
    },
  },
  ...NODE_CASES,
  ...HARDWARE_CASES,
  ...SEVERAL_MISTAKES,
];

/** Materialise a case into `dir` starting from `base` (cloned). */
export async function writeCase(c: CorpusCase, dir: string, base: DesiredTree): Promise<DesiredTree> {
  const tree = structuredClone(base);
  c.edit?.(tree);
  await writeDesired(dir, tree, c.raw?.(tree) ?? {});
  await c.after?.(dir, tree);
  return tree;
}
