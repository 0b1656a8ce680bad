// What a node record's ssh block and work_dir become in the engine spec
// (issue 10 items 2 and 3): defaults, resolved paths, the Docker endpoint a
// node reached over ssh defaults to, and which of them the input hash counts.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDesired } from "../../src/desired/load.js";
import { canonicalJson, inputHashMaterial, sha256Hex } from "../../src/desired/hash.js";
import type { EngineSpec } from "../../src/desired/types.js";
import { validTree, type DesiredTree, type Obj } from "./fixtures.js";
import { issuesWithFiles, nodes } from "./node-fixtures.js";

/** The fixture with an absolute model dir, so trees in different temp dirs hash alike. */
const tree = (node: Obj = {}): DesiredTree => {
  const t = validTree();
  t.env["NARWHAL_MODEL_DIR"] = "/srv/models/m";
  Object.assign(nodes(t)[0]!, node);
  return t;
};
const KEYS = { id_ed25519: 0o600, known_hosts: 0o644 };
const load = async (t: DesiredTree): Promise<{ dir: string; specs: EngineSpec[] }> => {
  const { dir, issues } = await issuesWithFiles(t, KEYS);
  expect(issues).toEqual([]);
  return { dir, specs: (await loadDesired(dir)).specs };
};
const hashes = async (t: DesiredTree) => (await load(t)).specs.map((s) => s.input_hash);

describe("node spec", () => {
  it("no ssh block: the local host, the default work_dir, no Docker endpoint", async () => {
    const [s] = (await load(tree())).specs;
    expect(s?.node.ssh).toBeUndefined();
    expect(s?.node.docker_host).toBeUndefined();
    expect(s?.node.work_dir).toBe("/var/lib/narwhal/runs");
  });

  it("ssh: port 22 by default, key and known_hosts resolved against the desired directory, Docker over the same ssh", async () => {
    const t = tree({
      ssh: { destination: "alice@gpu-b", identity_file: "id_ed25519", known_hosts_file: "known_hosts" },
      work_dir: "/srv/narwhal/runs/",
    });
    const { dir, specs } = await load(t);
    expect(specs[0]?.node).toMatchObject({
      ssh: {
        destination: "alice@gpu-b",
        port: 22,
        identity_file: join(dir, "id_ed25519"),
        known_hosts_file: join(dir, "known_hosts"),
      },
      docker_host: "ssh://alice@gpu-b",
      work_dir: "/srv/narwhal/runs",
    });
  });

  it.each([
    [{ destination: "alice@gpu-b", port: 2222 }, undefined, "ssh://alice@gpu-b:2222"],
    [{ destination: "fd00::12", port: 22 }, undefined, "ssh://[fd00::12]"],
    [{ destination: "alice@gpu-b" }, "tcp://10.0.0.12:2376", "tcp://10.0.0.12:2376"],
  ])("ssh %j with docker_host %j: Docker endpoint %s", async (ssh, dockerHost, want) => {
    const t = tree({ ssh, ...(dockerHost === undefined ? {} : { docker_host: dockerHost }) });
    expect((await load(t)).specs.map((s) => s.node.docker_host)).toEqual([want, want]);
  });
});

describe("input hash of where an engine runs", () => {
  // The fixture's hashes before node records had ssh and work_dir: engines on
  // the local host with the default work_dir are not replaced by an upgrade.
  const BEFORE = [
    "1b7242065b427de9be557d9b4c90ae3b766099a675c3fa177a2ae60ed9171d27",
    "795609b3e579e83cb2aee081d7dc59f02237ac2d7fa7d55a18eee580e3adaa9e",
  ];

  // Without the launcher digest, which changes every hash on purpose when narwhal's launcher changes
  // (src/desired/hash.ts INPUT_HASH_VERSION), and so cannot have a golden value here.
  const withoutLauncher = async (t: DesiredTree) =>
    (await load(t)).specs.map((s) => {
      const { launcher: _l, ...material } = inputHashMaterial(s);
      return sha256Hex(canonicalJson(material));
    });

  it("a local node with the default work_dir hashes as it did before (no INPUT_HASH_VERSION bump)", async () => {
    expect(await withoutLauncher(tree())).toEqual(BEFORE);
    expect(await withoutLauncher(tree({ work_dir: "/var/lib/narwhal/runs" }))).toEqual(BEFORE);
  });

  it("another host, another ssh port or another work_dir replaces the engine", async () => {
    const base = await hashes(tree({ ssh: { destination: "alice@gpu-b" } }));
    const changed = [
      await hashes(tree()),
      await hashes(tree({ ssh: { destination: "alice@gpu-c" } })),
      await hashes(tree({ ssh: { destination: "alice@gpu-b", port: 2222 } })),
      await hashes(tree({ ssh: { destination: "alice@gpu-b" }, work_dir: "/srv/runs" })),
    ];
    for (const c of changed) for (const [i, h] of c.entries()) expect(h).not.toBe(base[i]);
    expect(new Set(changed.flat().concat(base)).size).toBe(10);
  });

  it("the key and known_hosts the controller logs in with do not", async () => {
    const base = await hashes(tree({ ssh: { destination: "alice@gpu-b", port: 22 } }));
    const files = { destination: "alice@gpu-b", identity_file: "id_ed25519", known_hosts_file: "known_hosts" };
    expect(await hashes(tree({ ssh: files }))).toEqual(base);
    // Written out, the default Docker endpoint is the same launch.
    expect(await hashes(tree({ ssh: { destination: "alice@gpu-b" }, docker_host: "ssh://alice@gpu-b" }))).toEqual(base);
  });
});
