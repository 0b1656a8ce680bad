// pythonJsonDumps and groupSignature against the real Python running the
// seed's exact cache-group code; inputHash stability.
import { execFileSync } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  groupSignature,
  inputHash,
  inputHashMaterial,
  pythonJsonDumps,
} from "../../src/desired/hash.js";
import { loadDesired } from "../../src/desired/load.js";
import { Secret } from "../../src/desired/types.js";
import { rec, runtime, validTree, validTree as baseTree, writeTree } from "./fixtures.js";

const PYTHON = "/usr/bin/python3";
const python = (code: string, input: string, env: Record<string, string> = {}) =>
  execFileSync(PYTHON, ["-c", code], { input, env: { PATH: "/usr/bin:/bin", ...env }, encoding: "utf8" });

// Verbatim from seed 000 ("Derive cache-equivalence groups").
const SEED_CACHE_GROUPS = `import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path
launches = json.loads(Path(os.environ["NARWHAL_LAUNCH_CONFIG"]).read_text())["engines"]
groups = defaultdict(list)
for role, launch in sorted(launches.items()):
    observed = json.loads(Path(launch["sources"]["runtime"]).read_text())
    inputs = {
        "image_id": observed["image_id"],
        "model_config_sha256": observed["model_sha256"],
        "accelerator": launch["accelerator"],
        "tensor_parallel_size": launch["tensor_parallel_size"],
        "gpu_visibility_env": launch["gpu_visibility_env"],
        "runtime": launch["runtime"],
        "transport": launch["transfer"]["transport"],
    }
    signature = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    groups[signature].append(role)
for signature, roles in sorted(groups.items()):
    print(f"{signature}: representative={roles[0]}; roles={','.join(roles)}")
`;

const tricky = {
  z: [1, -2, 0, 0.5, -2.5, 0.1, 123.456, 1.2345e-5, 1e-7, 1e-300, 9007199254740993, true, false, null],
  é: 'naïve café — “quotes” \u007f DEL \u0000\u001f \b\f\n\r\t \\ " / 日本 🐋',
  "\uffff": "bmp max",
  "😀": "astral key sorts after U+FFFF by code point",
  a: { nested: { b: [], c: {} }, "": "empty key" },
};

describe("pythonJsonDumps", () => {
  it("matches json.dumps(sort_keys=True) byte for byte", () => {
    const py = python(
      "import json,sys; sys.stdout.write(json.dumps(json.loads(sys.stdin.read()), sort_keys=True))",
      JSON.stringify(tricky),
    );
    expect(pythonJsonDumps(tricky, { sortKeys: true })).toBe(py);
  });

  it("matches json.dumps without sorting and with ensure_ascii=False", () => {
    const v = { b: "ü\u007f", a: [1.5, "🐋"] };
    expect(pythonJsonDumps(v)).toBe(
      python("import json,sys; sys.stdout.write(json.dumps(json.loads(sys.stdin.read())))", JSON.stringify(v)),
    );
    expect(pythonJsonDumps(v, { ensureAscii: false })).toBe(
      python(
        "import json,sys; sys.stdout.buffer.write(json.dumps(json.loads(sys.stdin.read()), ensure_ascii=False).encode())",
        JSON.stringify(v),
      ),
    );
  });
});

describe("groupSignature", () => {
  it("equals the seed's Python signature for loaded engines", async () => {
    const tree = validTree();
    runtime(tree, 2)["environment"] = { NOTE: "ünïcode 🐋", TAB: "a\tb" };
    runtime(tree, 2)["extra_args"] = ["--max-num-seqs", "7", "--gpu-memory-utilization", "0.85"];
    const state = await loadDesired(await writeTree(tree));
    const dir = await mkdtemp(join(tmpdir(), "narwhal-groups-"));
    const engines: Record<string, unknown> = {};
    const ours: string[] = [];
    for (const s of state.specs) {
      const observed = join(dir, `${s.name}-runtime.json`);
      await writeFile(
        observed,
        JSON.stringify({ image_id: "sha256:" + "c".repeat(64), model_sha256: s.model.config_sha256 }),
      );
      engines[s.name] = { ...s.launch, sources: { runtime: observed } };
      const sig = groupSignature({
        image_id: "sha256:" + "c".repeat(64),
        model_config_sha256: s.model.config_sha256,
        accelerator: s.launch.accelerator,
        tensor_parallel_size: s.launch.tensor_parallel_size,
        gpu_visibility_env: s.launch.gpu_visibility_env,
        runtime: s.launch.runtime,
        transport: s.launch.transfer.transport,
      });
      ours.push(`${sig}: representative=${s.name}; roles=${s.name}`);
    }
    await writeFile(join(dir, "engine-launch.json"), JSON.stringify({ engines }));
    const py = python(SEED_CACHE_GROUPS, "", { NARWHAL_LAUNCH_CONFIG: join(dir, "engine-launch.json") });
    expect(py.trim().split("\n").sort()).toEqual(ours.sort());
    expect(ours[0]?.slice(0, 16)).not.toBe(ours[1]?.slice(0, 16)); // runtimes differ
  });

  it("ignores fields other than the seven inputs", () => {
    const inputs = {
      image_id: "i",
      model_config_sha256: "m",
      accelerator: "a",
      tensor_parallel_size: 1,
      gpu_visibility_env: "CUDA_VISIBLE_DEVICES" as const,
      transport: "ucx_tcp" as const,
      runtime: {
        expected_packages: { vllm: "1" },
        model_dtype: "bfloat16" as const,
        kv_cache_dtype: "auto",
        block_size: 16,
        environment: {},
        extra_args: [],
      },
    };
    expect(groupSignature({ ...inputs, gpu_ids: ["3"] } as typeof inputs)).toBe(groupSignature(inputs));
    expect(groupSignature(inputs)).toMatch(/^[0-9a-f]{16}$/);
  });
});

describe("inputHash", () => {
  it("is stable across key order", () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 2, e: 3 }], c: "x" } })).toBe(
      '{"a":{"c":"x","d":[1,{"e":3,"f":2}]},"b":1}',
    );
  });

  it("canonical JSON orders keys by code point (an astral key after U+FFFF), omits undefined, quotes keys as JSON", () => {
    expect(canonicalJson({ "😀": 1, "\uffff": 2, b: 3 })).toBe('{"b":3,"\uffff":2,"😀":1}');
    expect(canonicalJson({ b: 3, "\uffff": 2 })).toBe('{"b":3,"\uffff":2}'); // no surrogate: the same order
    expect(canonicalJson({ a: undefined, b: [undefined, 1], 'q"': { c: undefined } })).toBe('{"b":[null,1],"q\\"":{}}');
    // A key seen in many objects is quoted the same every time.
    expect(canonicalJson([{ "x\ny": 1 }, { "x\ny": 2 }])).toBe('[{"x\\ny":1},{"x\\ny":2}]');
  });

  it("takes the canonical JSON of a known object as given, and loaded specs hash as without it", async () => {
    const shared = { z: 1, a: [2, { y: 3, b: 4 }] };
    const known = new Map<object, string>([[shared, canonicalJson(shared)]]);
    const value = { second: shared, first: { shared }, list: [shared, 5] };
    expect(canonicalJson(value, known)).toBe(canonicalJson(value));
    // It is taken, not checked: what the caller knows stands for the object.
    expect(canonicalJson({ x: shared }, new Map([[shared, '"stands-in"']]))).toBe('{"x":"stands-in"}');
    // buildSpecs shares the launcher and the model among its specs, and hashes them so.
    const { specs } = await loadDesired(await writeTree(baseTree()));
    expect(specs[0]!.model).toBe(specs[1]!.model);
    for (const { input_hash, ...spec } of specs) expect(inputHash(spec)).toBe(input_hash);
  });

  it("does not change with key order in the files, changes with extra_args", async () => {
    // An absolute model dir: each tree lives in its own temp dir, and a
    // relative one would (rightly) resolve to different paths.
    const validTree = () => {
      const t = baseTree();
      t.env["NARWHAL_MODEL_DIR"] = "/srv/models/m";
      return t;
    };
    const a = await loadDesired(await writeTree(validTree()));
    const shuffled = validTree();
    const r = rec(shuffled, 1);
    const reversed = Object.fromEntries(Object.entries(r).reverse());
    (shuffled.launch["engines"] as Record<string, unknown>)["engine-1"] = reversed;
    const b = await loadDesired(await writeTree(shuffled));
    expect(b.specs[0]?.input_hash).toBe(a.specs[0]?.input_hash);

    const changed = validTree();
    runtime(changed, 1)["extra_args"] = ["--max-model-len", "8192"];
    const c = await loadDesired(await writeTree(changed));
    expect(c.specs[0]?.input_hash).not.toBe(a.specs[0]?.input_hash);
    expect(c.specs[1]?.input_hash).toBe(a.specs[1]?.input_hash);
  });

  it("counts NARWHAL_MODEL_TREE_SHA256 only when set, so fleets without the pin keep their hashes", async () => {
    const withPin = async (pin?: string) => {
      const t = validTree();
      t.env["NARWHAL_MODEL_DIR"] = "/srv/models/m";
      if (pin !== undefined) t.env["NARWHAL_MODEL_TREE_SHA256"] = pin;
      return (await loadDesired(await writeTree(t))).specs[0]!;
    };
    const unset = await withPin();
    expect(unset.model.tree_sha256).toBeUndefined();
    // Not even a null: the material is what it was before the pin existed.
    expect(canonicalJson(inputHashMaterial(unset))).not.toContain("tree_sha256");
    const a = await withPin("a".repeat(64));
    const b = await withPin("b".repeat(64));
    expect(a.model.tree_sha256).toBe("a".repeat(64));
    expect(a.input_hash).not.toBe(unset.input_hash);
    expect(b.input_hash).not.toBe(a.input_hash);
    expect((await withPin("a".repeat(64))).input_hash).toBe(a.input_hash);
  });

  it("reads NARWHAL_ENGINE_LAUNCHER_SHA256 as the launcher pin and never hashes it: pinning replaces no engine", async () => {
    const withPin = async (pin?: string) => {
      const t = validTree();
      // Not under the tree's own temp dir: the trees compared must differ in the pin alone.
      t.env["NARWHAL_MODEL_DIR"] = "/srv/models/m";
      if (pin !== undefined) t.env["NARWHAL_ENGINE_LAUNCHER_SHA256"] = pin;
      return (await loadDesired(await writeTree(t))).specs[0]!;
    };
    const unset = await withPin();
    expect(unset.launcher_pin).toBeUndefined();
    const pinned = await withPin(unset.launcher.digest);
    expect(pinned.launcher_pin).toBe(unset.launcher.digest);
    expect(pinned.input_hash).toBe(unset.input_hash);
    expect((await withPin("b".repeat(64))).input_hash).toBe(unset.input_hash);
    expect(canonicalJson(inputHashMaterial(pinned))).not.toContain("launcher_pin");
  });

  it("ignores ready_seconds, counts the API key only as a digest", async () => {
    const [spec] = (await loadDesired(await writeTree(validTree()))).specs;
    if (!spec) throw new Error("no spec");
    expect(inputHash({ ...spec, ready_seconds: 5 })).toBe(spec.input_hash);
    expect(inputHash({ ...spec, api_key: new Secret("other") })).not.toBe(spec.input_hash);
    expect(canonicalJson(inputHashMaterial(spec))).not.toContain("k-123");
  });
});
