// loadDesired end to end: file safety, schemas, all errors at once, and the
// trees shipped in desired/ and examples/.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDesired, validateDesired } from "../../src/desired/load.js";
import { DesiredStateError } from "../../src/errors.js";
import { LocalHost } from "../../src/hosts/local.js";
import { modelManifest } from "../../src/phases/host/model-manifest.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import { fleetEngine, issuesOf, rec, runtime, validTree, writeTree, type Obj } from "./fixtures.js";

const repo = resolve(import.meta.dirname, "../..");

describe("file safety", () => {
  it("reports a missing file", async () => {
    const dir = await writeTree(validTree());
    const { rm } = await import("node:fs/promises");
    await rm(join(dir, "fleet.json"));
    expect((await validateDesired(dir)).issues).toContainEqual(
      expect.objectContaining({ file: "fleet.json", path: "$", rule: "syntax" }),
    );
  });

  it.each([
    ["empty", "", /is empty/],
    ["BOM", "\ufeff{}", /byte-order mark/],
    ["truncated", '{"engines": [', /truncated/],
    ["invalid", '{"engines": ]}', /not valid JSON at line 1 column 13: unexpected "]"/],
    ["trailing comma", '{\n  "engines": {},\n}', /line 3 column 1/],
    ["too deep", "[".repeat(40) + "]".repeat(40), /deeper than 32/],
    ["too large", JSON.stringify({ x: "a".repeat(1100 * 1024) }), /limit is 1064960 \(1 MiB \+ 8 KiB × 2 engines/],
  ])("reports a %s JSON file as an issue", async (_name, text, message) => {
    const issues = await issuesOf(() => {}, { launch: text });
    expect(issues).toContainEqual(
      expect.objectContaining({ file: "engine-launch.json", rule: "syntax", message: expect.stringMatching(message) }),
    );
  });

  it("rejects __proto__, constructor and prototype keys without polluting Object.prototype", async () => {
    const text = '{"engines": {"engine-1": {"__proto__": {"polluted": true}}}, "constructor": {"prototype": {}}}';
    const issues = await issuesOf(() => {}, { launch: text });
    expect(
      issues
        .filter((i) => i.file === "engine-launch.json")
        .map((i) => i.path)
        .sort(),
    ).toEqual(["$.constructor", '$.engines["engine-1"].__proto__']);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
  });
});

describe("schemas", () => {
  it("rejects unknown fields with their paths (strict)", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["gpus"] = 1;
      fleetEngine(t, 0)["port"] = 1;
    });
    expect(issues).toContainEqual({
      file: "engine-launch.json",
      path: '$.engines["engine-1"].gpus',
      rule: "schema",
      message: expect.stringMatching(/unknown field/),
    });
    expect(issues).toContainEqual(
      expect.objectContaining({ file: "fleet.json", path: "$.engines[0].port", rule: "schema" }),
    );
  });

  it("reports wrong types and enums at their JSON paths", async () => {
    const issues = await issuesOf((t) => {
      (rec(t, 2)["transfer"] as Obj)["transport"] = "tcp";
      runtime(t, 2)["block_size"] = "16";
      rec(t, 1)["network_mode"] = "bridge";
      (t.launch["engines"] as Obj)["worker-3"] = {};
    });
    const paths = issues.filter((i) => i.rule === "schema").map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        '$.engines["engine-2"].transfer.transport',
        '$.engines["engine-2"].runtime.block_size',
        '$.engines["engine-1"].network_mode',
      ]),
    );
    expect(issues.some((i) => i.path.startsWith('$.engines["worker-3"]'))).toBe(true);
  });

  it("normalises integer gpu_ids to strings and defaults backend to container", async () => {
    const tree = validTree();
    rec(tree, 1)["gpu_ids"] = [0];
    delete rec(tree, 1)["backend"];
    const state = await loadDesired(await writeTree(tree));
    expect(state.specs[0]?.launch.gpu_ids).toEqual(["0"]);
    expect(state.specs[0]?.backend).toBe("container");
  });

  it("substitution happens before schema checks, so enums may come from variables", async () => {
    const tree = validTree();
    tree.env["NARWHAL_TRANSPORT"] = "ucx_tcp";
    (rec(tree, 1)["transfer"] as Obj)["transport"] = "${NARWHAL_TRANSPORT}";
    expect((await validateDesired(await writeTree(tree))).issues).toEqual([]);
  });
});

describe("all errors at once", () => {
  it("collects env, syntax, substitution, schema and rule issues across files in one DesiredStateError", async () => {
    const tree = validTree();
    delete tree.env["NARWHAL_NODE_1_IP"];
    tree.env["NARWHAL_MODEL_CONFIG_SHA256"] = "nope";
    rec(tree, 2)["tensor_parallel_size"] = 3;
    rec(tree, 1)["bogus"] = true;
    runtime(tree, 1)["extra_args"] = ["--dtype=float16"];
    fleetEngine(tree, 1)["role"] = "other";
    const dir = await writeTree(tree, {
      env:
        Object.entries(tree.env)
          .map(([k, v]) => `${k}=${v}`)
          .join("\n") + "\nbad line\n",
    });
    const err = await loadDesired(dir).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DesiredStateError);
    const rules = new Set((err as DesiredStateError).issues.map((i) => i.rule));
    expect([...rules].sort()).toEqual(
      expect.arrayContaining(["syntax", "model-config-sha256", "substitution", "schema"]),
    );
    const sub = (err as DesiredStateError).issues.find((i) => i.rule === "substitution");
    expect(sub).toMatchObject({ file: "fleet.json", path: "$.engines[0].url" });
    expect(sub?.message).toMatch(/NARWHAL_NODE_1_IP/);
    // No cascade from the unresolved URL (url-format etc. at the same path).
    expect((err as DesiredStateError).issues.filter((i) => i.path === "$.engines[0].url")).toHaveLength(1);
    expect((err as DesiredStateError).describe()).toMatch(/desired state is invalid/);
  });

  it("still runs rules when only the other file is broken", async () => {
    const issues = await issuesOf(
      (t) => {
        rec(t, 1)["tensor_parallel_size"] = 2;
      },
      { fleet: "{" },
    );
    expect(issues.map((i) => i.rule)).toEqual(expect.arrayContaining(["syntax", "tp-equals-gpu-count"]));
  });
});

describe("loaded state", () => {
  it("resolves relative paths against the desired directory and keeps secrets out of variables", async () => {
    const tree = validTree();
    tree.env["NARWHAL_NATIVE_PYTHONPATH"] = "site:/abs/lib";
    tree.env["NARWHAL_NATIVE_PYTHON"] = "venv/bin/python";
    tree.fleet["nodes"] = [
      {
        name: "gpu-a",
        engines: ["n1", "n2"],
        sysfs_root: "fx/sys",
        nvidia_smi: "nvidia-smi",
        rocminfo: "./bin/rocminfo",
      },
    ];
    const dir = await writeTree(tree);
    const state = await loadDesired(dir);
    const s = state.specs[0]!;
    expect(s.model.dir).toBe(join(dir, "models/m"));
    expect(state.variables["NARWHAL_NATIVE_PYTHONPATH"]).toBe(`${join(dir, "site")}:/abs/lib`);
    expect(s.python).toBe(join(dir, "venv/bin/python"));
    expect(s.node).toEqual({
      name: "gpu-a",
      sysfs_root: join(dir, "fx/sys"),
      nvidia_smi: "nvidia-smi",
      rocminfo: join(dir, "bin/rocminfo"),
      dev_root: "/",
      work_dir: "/var/lib/narwhal/runs",
    });
    expect(state.variables["NARWHAL_ENGINE_API_KEY"]).toBeUndefined();
    expect(state.secrets).toEqual(["k-123"]);
    expect(s.api_key?.reveal()).toBe("k-123");
    expect(JSON.stringify({ ...state, secrets: [] })).not.toContain("k-123");
    expect(state.variables["NARWHAL_NODE_2_URL"]).toBe("http://10.0.0.11:8001");
    expect(s).toMatchObject({
      host: "10.0.0.11",
      http_port: 8000,
      attestation_port: 8010,
      nixl_port: 5600,
      nixl_host: "10.0.0.11",
      ready_seconds: 180,
    });
    expect(state.specs[1]).toMatchObject({ http_port: 8001, attestation_port: 8011, nixl_port: 5601 });
    expect(s.launch.environment).toEqual({ CUDA_VISIBLE_DEVICES: "0", UCX_NET_DEVICES: "eth0" });
    expect(s.launch.vllm_args).toEqual(["--tensor-parallel-size", "1"]);
  });

  it("the default desired/ loads with two native engines on one node", async () => {
    const state = await loadDesired(join(repo, "desired"));
    expect(
      state.specs.map((s) => [s.name, s.iid, s.role, s.backend, s.http_port, s.attestation_port, s.nixl_port]),
    ).toEqual([
      ["engine-1", "n1", "prefill", "native", 18101, 18111, 18121],
      ["engine-2", "n2", "decode", "native", 18102, 18112, 18122],
    ]);
    expect(state.specs[0]?.launch.runtime.environment["PYTHONPATH"]).toBe(join(repo, "test/sim/site"));
    expect(state.specs[0]?.node.nvidia_smi).toBe(join(repo, "test/fixtures/hosts/h100x2/bin/nvidia-smi"));
  });

  it("the default desired/ pins the sha256 of the simulator model's config.json", async (ctx) => {
    const state = await loadDesired(join(repo, "desired"));
    const config = join(state.specs[0]!.model.dir, "config.json");
    if (!existsSync(config)) return ctx.skip();
    const actual = createHash("sha256").update(readFileSync(config)).digest("hex");
    expect(state.specs[0]?.model.config_sha256, "update NARWHAL_MODEL_CONFIG_SHA256 in desired/deployment.env").toBe(
      actual,
    );
  });

  it.each(["desired", "examples/container-sim", "examples/two-host-sim"])(
    "%s pins the tree digest of the simulator model it names (recomputed, so it never goes stale)",
    async (tree) => {
      const made = await withRigKeyFiles(join(repo, tree));
      const state = await loadDesired(join(repo, tree)).finally(() => {
        for (const f of made) rmSync(f, { force: true, recursive: true });
      });
      const model = state.specs[0]!.model;
      const { manifest } = await modelManifest(new LocalHost("controller", { PATH: "/usr/bin:/bin" }), model.dir, {
        signal: new AbortController().signal,
      });
      expect(model.tree_sha256, `update NARWHAL_MODEL_TREE_SHA256 in ${tree}/deployment.env`).toBe(
        manifest.tree_sha256,
      );
    },
  );

  it("every example whose model directory is in the repository pins its tree", async () => {
    const unpinned: string[] = [];
    for (const name of readdirSync(join(repo, "examples"))) {
      const dir = join(repo, "examples", name);
      // Not every example is a desired tree (examples/systemd is a unit file and its env file).
      if (!existsSync(join(dir, "fleet.json"))) continue;
      const made = await withRigKeyFiles(dir);
      const result = await validateDesired(dir).finally(() => {
        for (const f of made) rmSync(f, { force: true, recursive: true });
      });
      const model = result.state?.specs[0]?.model;
      if (model && existsSync(model.dir) && model.tree_sha256 === undefined) unpinned.push(name);
    }
    expect(unpinned).toEqual([]);
  });

  const examples = readdirSync(join(repo, "examples"), { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(repo, "examples", d.name, "fleet.json")))
    .map((d) => d.name);
  it.each(examples)("examples/%s loads cleanly", async (name) => {
    const dir = join(repo, "examples", name);
    const made = await withRigKeyFiles(dir);
    try {
      const result = await validateDesired(dir);
      expect(result.issues).toEqual([]);
      expect(result.state?.specs.length).toBeGreaterThan(0);
    } finally {
      for (const f of made) rmSync(f, { force: true, recursive: true });
    }
  });

  it("examples/two-host-sim without its rig names the key files the rig puts there", async () => {
    const dir = join(repo, "examples", "two-host-sim");
    if (existsSync(join(dir, "rig"))) return; // a rig is up (the rig test writes them): nothing is missing
    const result = await validateDesired(dir);
    expect(result.issues.map((i) => i.path)).toEqual([
      "$.nodes[0].ssh.identity_file",
      "$.nodes[0].ssh.known_hosts_file",
      "$.nodes[1].ssh.identity_file",
      "$.nodes[1].ssh.known_hosts_file",
    ]);
    expect(result.issues[0]?.message).toMatch(/rig\/id_ed25519 does not exist/);
  });
});

/**
 * An example on the test rig (two-host-sim) names the rig's ssh key and known_hosts under rig/,
 * which only a live rig writes: stand-ins (0600) make the rest of the tree checkable. Returns what it made.
 */
async function withRigKeyFiles(dir: string): Promise<string[]> {
  const fleet = JSON.parse(readFileSync(join(dir, "fleet.json"), "utf8")) as {
    nodes: Array<{ ssh?: { identity_file?: string; known_hosts_file?: string } }>;
  };
  const wanted = new Set(
    fleet.nodes.flatMap((n) => [n.ssh?.identity_file, n.ssh?.known_hosts_file]).filter((f) => f?.startsWith("rig/")),
  );
  const made: string[] = [];
  for (const rel of wanted) {
    const file = join(dir, rel!);
    if (existsSync(file)) continue;
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, "", { mode: 0o600 });
    made.push(file);
  }
  if (made.length > 0) made.push(join(dir, "rig"));
  return made;
}

describe("fleet.json rollout block", () => {
  it("is optional: without it the documented defaults apply (1 per role, P/D units)", async () => {
    const state = await loadDesired(await writeTree(validTree()));
    expect(state.rollout).toEqual({ max_unavailable: {}, default_max_unavailable: 1, incompatible: "pd_units" });
    expect(state.rollout).toEqual(DEFAULT_ROLLOUT);
  });

  it("takes counts and percentages per role", async () => {
    const tree = validTree();
    tree.fleet["rollout"] = {
      max_unavailable: { prefill: 1, decode: "25%" },
      default_max_unavailable: 2,
      incompatible: "recreate",
    };
    const state = await loadDesired(await writeTree(tree));
    expect(state.rollout).toEqual({
      max_unavailable: { prefill: 1, decode: "25%" },
      default_max_unavailable: 2,
      incompatible: "recreate",
    });
  });

  it.each([
    [
      { max_unavailable: { decode: "0%" } },
      "$.rollout.max_unavailable.decode",
      /must be a count such as 1 or a percentage "1%" to "100%"/,
    ],
    [
      { max_unavailable: { decode: 0 } },
      "$.rollout.max_unavailable.decode",
      /^must be at least 1: with none allowed out of service/,
    ],
    [{ default_max_unavailable: "150%" }, "$.rollout.default_max_unavailable", /"1%" to "100%"/],
    [{ incompatible: "rolling" }, "$.rollout.incompatible", /"pd_units"\|"recreate"/],
    [{ max_unavailble: {} }, "$.rollout.max_unavailble", /unknown field/],
  ])("rejects %j at its path", async (block, path, message) => {
    const issues = await issuesOf((t) => {
      t.fleet["rollout"] = block;
    });
    expect(issues).toContainEqual(
      expect.objectContaining({ file: "fleet.json", path, rule: "schema", message: expect.stringMatching(message) }),
    );
  });

  it("rejects a max_unavailable for a role no engine has, suggesting the close one", async () => {
    const issues = await issuesOf((t) => {
      t.fleet["rollout"] = { max_unavailable: { decoe: 2 } };
    });
    expect(issues).toEqual([
      {
        file: "fleet.json",
        path: "$.rollout.max_unavailable.decoe",
        rule: "rollout-roles",
        message:
          'no engine has role "decoe"; did you mean "decode"? (roles in this fleet: prefill, decode); name a role of the engines or remove the entry',
      },
    ]);
  });
});
