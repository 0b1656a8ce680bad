// One failing case per rule, each asserting file, JSON path and rule name.
import { describe, expect, it } from "vitest";
import { RULE_NAMES } from "../../src/desired/rules.js";
import type { ValidationIssue } from "../../src/errors.js";
import { fleetEngine, issuesOf, rec, runtime, type Obj } from "./fixtures.js";

const only = (issues: ValidationIssue[], rule: string) => issues.filter((i) => i.rule === rule);
const expectIssue = (issues: ValidationIssue[], want: Partial<ValidationIssue>) =>
  expect(issues).toContainEqual(expect.objectContaining(want));

describe("rules", () => {
  it("the valid fixture has no issues", async () => {
    expect(await issuesOf(() => {})).toEqual([]);
  });

  it("tp-equals-gpu-count", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["tensor_parallel_size"] = 2;
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-1"].tensor_parallel_size',
      rule: "tp-equals-gpu-count",
    });
  });

  it("gpu-ids-unique", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["gpu_ids"] = ["0", "0"];
      rec(t, 1)["tensor_parallel_size"] = 2;
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-1"].gpu_ids[1]',
      rule: "gpu-ids-unique",
    });
  });

  it("hardware-matches-allocation: accelerators_per_engine and tensor_parallel", async () => {
    const issues = await issuesOf((t) => {
      const hw = t.fleet["hardware"] as Obj;
      hw["accelerators_per_engine"] = 2;
      hw["tensor_parallel"] = 2;
    });
    expectIssue(issues, {
      file: "fleet.json",
      path: "$.hardware.accelerators_per_engine",
      rule: "hardware-matches-allocation",
    });
    expectIssue(issues, {
      file: "fleet.json",
      path: "$.hardware.tensor_parallel",
      rule: "hardware-matches-allocation",
    });
  });

  it("accelerator-matches-hardware", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 2)["accelerator"] = "NVIDIA A100-SXM4-80GB";
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-2"].accelerator',
      rule: "accelerator-matches-hardware",
    });
  });

  it("gpu-ids-disjoint-per-host", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 2)["gpu_ids"] = ["0"];
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-2"].gpu_ids[0]',
      rule: "gpu-ids-disjoint-per-host",
    });
  });

  it("gpu ids may repeat on different hosts", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 2)["gpu_ids"] = ["0"];
      t.fleet["nodes"] = [
        { name: "a", engines: ["n1"] },
        { name: "b", engines: ["n2"] },
      ];
      t.env["NARWHAL_NODE_2_IP"] = "10.0.0.12";
    });
    expect(issues).toEqual([]);
  });

  it("ports-unique-per-host: HTTP, attestation and NIXL", async () => {
    const issues = await issuesOf((t) => {
      delete t.env["NARWHAL_NODE_2_ENGINE_PORT"];
      t.env["NARWHAL_NODE_2_ATTEST_PORT"] = "8001";
      delete t.env["NARWHAL_NODE_2_NIXL_PORT"];
    });
    const ports = only(issues, "ports-unique-per-host");
    expectIssue(ports, { file: "fleet.json", path: "$.engines[1].url" });
    expect(ports.map((i) => i.path)).toContain("$.NARWHAL_NODE_2_NIXL_PORT");
    expect(ports.find((i) => i.file === "deployment.env")?.message).toMatch(/NIXL side-channel.*5600/);
  });

  it("ports-unique-per-host: attestation port colliding with another engine's HTTP port", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_NODE_2_ATTEST_PORT"] = "8000";
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[1].attestation_url", rule: "ports-unique-per-host" });
  });

  it("ports-unique-per-host: transfer ports", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_TRANSFER_PORTS"] = "7000";
    });
    expectIssue(issues, {
      file: "deployment.env",
      path: "$.NARWHAL_NODE_2_TRANSFER_PORTS",
      rule: "ports-unique-per-host",
    });
  });

  it("rocm-devices", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["gpu_visibility_env"] = "ROCR_VISIBLE_DEVICES";
      rec(t, 1)["accelerator_devices"] = ["/dev/dri/renderD128"];
    });
    const rocm = only(issues, "rocm-devices");
    expect(rocm).toHaveLength(1);
    expectIssue(rocm, { file: "engine-launch.json", path: '$.engines["engine-1"].accelerator_devices' });
    expect(rocm[0]?.message).toMatch(/\/dev\/kfd/);
  });

  it("transfer-devices: RDMA needs devices, TCP uses none", async () => {
    const issues = await issuesOf((t) => {
      (rec(t, 1)["transfer"] as Obj)["transport"] = "ucx_rdma";
      (rec(t, 2)["transfer"] as Obj)["devices"] = ["/dev/infiniband/uverbs0"];
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-1"].transfer.devices',
      rule: "transfer-devices",
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-2"].transfer.devices',
      rule: "transfer-devices",
    });
  });

  it("extra-args-managed: plain, =-form, underscore form and --no-trust-remote-code; --trust-remote-code is the operator's", async () => {
    const issues = await issuesOf((t) => {
      runtime(t, 1)["extra_args"] = [
        "--max-model-len",
        "4096",
        "--port",
        "9",
        "--block-size=32",
        "--tensor_parallel_size=2",
        "--no-trust-remote-code",
        "--trust-remote-code",
      ];
    });
    const paths = only(issues, "extra-args-managed").map((i) => [i.file, i.path]);
    expect(paths).toEqual(
      [2, 4, 5, 6].map((n) => ["engine-launch.json", `$.engines["engine-1"].runtime.extra_args[${n}]`]),
    );
    expect(only(issues, "remote-code-opt-in")).toEqual([]);
  });

  it("remote-code-opt-in: --trust-remote-code with a value or abbreviated is refused, in extra_args and NARWHAL_ENGINE_ARGS", async () => {
    const issues = await issuesOf((t) => {
      runtime(t, 1)["extra_args"] = ["--trust-remote-code=false"];
      runtime(t, 2)["extra_args"] = ["--trust_remote_code"];
      t.env["NARWHAL_ENGINE_ARGS"] = "--trust-remote";
    });
    const found = only(issues, "remote-code-opt-in").map((i) => i.message);
    expect(found).toEqual([
      expect.stringMatching(/^engine-1: --trust-remote-code=false gives --trust-remote-code a value/),
      expect.stringMatching(/^engine-1: --trust-remote abbreviates --trust-remote-code/),
      expect.stringMatching(/^engine-2: --trust-remote abbreviates --trust-remote-code/),
    ]);
  });

  it("runtime-env-managed", async () => {
    const issues = await issuesOf((t) => {
      runtime(t, 2)["environment"] = { UCX_TLS: "tcp", NCCL_DEBUG: "INFO" };
    });
    expect(only(issues, "runtime-env-managed")).toEqual([
      expect.objectContaining({
        file: "engine-launch.json",
        path: '$.engines["engine-2"].runtime.environment.UCX_TLS',
      }),
    ]);
  });

  it("derived-fields-agree: matching derived fields load, disagreeing ones are rejected", async () => {
    expect(
      await issuesOf((t) => {
        rec(t, 1)["environment"] = { CUDA_VISIBLE_DEVICES: "0", UCX_NET_DEVICES: "eth0" };
        rec(t, 1)["vllm_args"] = ["--tensor-parallel-size", "1"];
      }),
    ).toEqual([]);
    const issues = await issuesOf((t) => {
      rec(t, 1)["environment"] = { CUDA_VISIBLE_DEVICES: "1", UCX_NET_DEVICES: "eth0" };
      rec(t, 1)["vllm_args"] = ["--tensor-parallel-size", "2"];
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-1"].environment',
      rule: "derived-fields-agree",
    });
    expectIssue(issues, {
      file: "engine-launch.json",
      path: '$.engines["engine-1"].vllm_args',
      rule: "derived-fields-agree",
    });
  });

  it("fleet-launch-pairing: both directions", async () => {
    const issues = await issuesOf((t) => {
      (t.launch["engines"] as Obj)["engine-3"] = rec(t, 2);
      delete (t.launch["engines"] as Obj)["engine-2"];
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[1].iid", rule: "fleet-launch-pairing" });
    expectIssue(issues, { file: "engine-launch.json", path: '$.engines["engine-3"]', rule: "fleet-launch-pairing" });
  });

  it("unique-names", async () => {
    const issues = await issuesOf((t) => {
      t.fleet["nodes"] = [
        { name: "a", engines: ["n1"] },
        { name: "a", engines: ["n2"] },
      ];
    });
    expectIssue(issues, { file: "fleet.json", path: "$.nodes[1].name", rule: "unique-names" });
  });

  it("engine-on-one-node: missing, twice, unknown", async () => {
    const issues = await issuesOf((t) => {
      t.fleet["nodes"] = [
        { name: "a", engines: ["n1", "n9"] },
        { name: "b", engines: ["n1"] },
      ];
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[1]", rule: "engine-on-one-node" });
    expectIssue(issues, { file: "fleet.json", path: "$.nodes[1].engines[0]", rule: "engine-on-one-node" });
    expectIssue(issues, { file: "fleet.json", path: "$.nodes[0].engines[1]", rule: "engine-on-one-node" });
  });

  it("role-matches-fleet", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 2)["role"] = "prefill";
    });
    expectIssue(issues, { file: "engine-launch.json", path: '$.engines["engine-2"].role', rule: "role-matches-fleet" });
  });

  it("container-image", async () => {
    const issues = await issuesOf((t) => {
      delete rec(t, 1)["image"];
    });
    expectIssue(issues, { file: "engine-launch.json", path: '$.engines["engine-1"].image', rule: "container-image" });
  });

  it("native-revision", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["backend"] = "native";
      delete t.env["NARWHAL_MODEL_REVISION"];
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_MODEL_REVISION", rule: "native-revision" });
  });

  it("url-format", async () => {
    const issues = await issuesOf((t) => {
      fleetEngine(t, 0)["url"] = "ftp://10.0.0.11:8000";
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[0].url", rule: "url-format" });
  });

  it("url-matches-variables", async () => {
    const issues = await issuesOf((t) => {
      fleetEngine(t, 0)["url"] = "http://10.0.0.11:9000";
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[0].url", rule: "url-matches-variables" });
  });

  it("host-consistency: one node, two addresses", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_NODE_2_IP"] = "10.0.0.12";
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[1].url", rule: "host-consistency" });
  });

  it("host-consistency: two nodes, one address", async () => {
    const issues = await issuesOf((t) => {
      t.fleet["nodes"] = [
        { name: "a", engines: ["n1"] },
        { name: "b", engines: ["n2"] },
      ];
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[1].url", rule: "host-consistency" });
  });

  it("required-variables", async () => {
    const issues = await issuesOf((t) => {
      delete t.env["NARWHAL_ENGINE_MODEL_NAME"];
      delete t.env["NARWHAL_FABRIC_INTERFACE"];
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_ENGINE_MODEL_NAME", rule: "required-variables" });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_FABRIC_INTERFACE", rule: "required-variables" });
  });

  it("model-config-sha256", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_MODEL_CONFIG_SHA256"] = "ABC";
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_MODEL_CONFIG_SHA256", rule: "model-config-sha256" });
  });

  it("model-tree-sha256", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_MODEL_TREE_SHA256"] = "f".repeat(63);
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_MODEL_TREE_SHA256", rule: "model-tree-sha256" });
    // Set but empty is no pin either: named, not taken for "unset".
    const empty = await issuesOf((t) => {
      t.env["NARWHAL_MODEL_TREE_SHA256"] = "";
    });
    expectIssue(empty, { file: "deployment.env", path: "$.NARWHAL_MODEL_TREE_SHA256", rule: "model-tree-sha256" });
  });

  it("launcher-sha256", async () => {
    for (const v of ["A".repeat(64), "f".repeat(63), ""]) {
      const issues = await issuesOf((t) => {
        t.env["NARWHAL_ENGINE_LAUNCHER_SHA256"] = v;
      });
      expectIssue(issues, {
        file: "deployment.env",
        path: "$.NARWHAL_ENGINE_LAUNCHER_SHA256",
        rule: "launcher-sha256",
      });
    }
    expect(
      await issuesOf((t) => {
        t.env["NARWHAL_ENGINE_LAUNCHER_SHA256"] = "f".repeat(64);
      }),
    ).toEqual([]);
  });

  it("port-variables", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_NIXL_PORT"] = "70000";
      t.env["NARWHAL_NODE_1_ENGINE_PORT"] = "80a";
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_NIXL_PORT", rule: "port-variables" });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_NODE_1_ENGINE_PORT", rule: "port-variables" });
  });

  it("ready-seconds", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_READY_SECONDS"] = "0";
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_READY_SECONDS", rule: "ready-seconds" });
  });

  it("non-empty-values", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_ENGINE_API_KEY"] = "";
    });
    expectIssue(issues, { file: "deployment.env", path: "$.NARWHAL_ENGINE_API_KEY", rule: "non-empty-values" });
  });

  it("variable-names: a misspelt variable names the one it most likely means", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_READY_SECOND"] = "600";
      t.env["NARWHAL_NODE_2_NIXL_PROT"] = "5601";
    });
    expectIssue(issues, {
      file: "deployment.env",
      path: "$.NARWHAL_READY_SECOND",
      rule: "variable-names",
      message: expect.stringMatching(/did you mean NARWHAL_READY_SECONDS\?/),
    });
    // Per-node names are compared with their own node's variables, not another node's.
    expectIssue(issues, {
      file: "deployment.env",
      path: "$.NARWHAL_NODE_2_NIXL_PROT",
      rule: "variable-names",
      message: expect.stringMatching(/did you mean NARWHAL_NODE_2_NIXL_PORT\?/),
    });
  });

  it("variable-names: the operator's own variables are allowed when a ${NAME} uses them or no known name is close", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_READY_SECOND"] = "x";
      (runtime(t, 1)["environment"] as Obj)["MY_SETTING"] = "${NARWHAL_READY_SECOND}";
      t.env["NARWHAL_MODEL_TAG"] = "v2";
      t.env["NARWHAL_NODE_3_IP"] = "10.0.0.12";
    });
    expect(only(issues, "variable-names")).toEqual([]);
  });

  it("variable-names is not guessed when a JSON file cannot be read (its ${NAME} uses are unknown)", async () => {
    const issues = await issuesOf(
      (t) => {
        t.env["NARWHAL_READY_SECOND"] = "600";
      },
      { fleet: "{" },
    );
    expect(only(issues, "variable-names")).toEqual([]);
  });

  it("every named rule has a test above", () => {
    expect([...RULE_NAMES].sort()).toEqual(
      [
        "accelerator-matches-hardware",
        "container-image",
        "derived-fields-agree",
        "engine-on-one-node",
        "extra-args-managed",
        "fleet-launch-pairing",
        "gpu-ids-disjoint-per-host",
        "gpu-ids-unique",
        "hardware-matches-allocation",
        "host-consistency",
        "launcher-sha256",
        "model-config-sha256",
        "model-tree-sha256",
        "native-revision",
        "non-empty-values",
        "port-variables",
        "ports-unique-per-host",
        "ready-seconds",
        "remote-code-opt-in",
        "required-variables",
        "rocm-devices",
        "role-matches-fleet",
        "runtime-env-managed",
        "tp-equals-gpu-count",
        "transfer-devices",
        "unique-names",
        "url-format",
        "url-matches-variables",
        "variable-names",
        // Tested in test/engine/launch-rules.test.ts.
        "engine-args-env",
        "gguf-model",
        "rocm-dri-per-gpu",
        "shared-device",
        "shared-device-consistent",
        // Tested in test/desired-corpus (newline-in-value trees).
        "single-line-values",
        // Tested in test/desired/load.test.ts ("fleet.json rollout block").
        "rollout-roles",
        // Tested in test/desired/rules-nixl-compat.test.ts.
        "pd-nixl-compatible",
        // Tested in test/desired-corpus/corpus-hardware.ts (TP ratio, block size).
        "pd-handshake-tp",
        // Tested in test/desired/rules-nodes.test.ts.
        "node-ssh-destination",
        "node-ssh-files",
        "node-work-dir",
        // Tested in test/desired/rules-image.test.ts.
        "image-identity",
      ].sort(),
    );
  });
});

// Item 16 of issue 8: a schema error in one record used to hide every rule about the others.
describe("rules over the records that passed their schema", () => {
  it("a broken launch record leaves the rules about the other records running", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["gpus"] = 1;
      rec(t, 2)["tensor_parallel_size"] = 2;
    });
    expectIssue(issues, { path: '$.engines["engine-1"].gpus', rule: "schema" });
    expectIssue(issues, { path: '$.engines["engine-2"].tensor_parallel_size', rule: "tp-equals-gpu-count" });
    // The broken record is skipped by the rules, not reported again as missing.
    expect(only(issues, "fleet-launch-pairing")).toEqual([]);
  });

  it("a broken fleet record is neither unpaired nor unlisted, and the fleet rules still judge the others", async () => {
    const issues = await issuesOf((t) => {
      fleetEngine(t, 1)["role"] = 7;
      t.env["NARWHAL_NODE_1_URL"] = "http://10.0.0.11:8000/v1";
    });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[1].role", rule: "schema" });
    expectIssue(issues, { file: "fleet.json", path: "$.engines[0].url", rule: "url-format" });
    expect(issues.filter((i) => i.rule === "fleet-launch-pairing" || i.rule === "engine-on-one-node")).toEqual([]);
  });

  it("broken hardware skips only the rules that compare against it", async () => {
    const issues = await issuesOf((t) => {
      (t.fleet["hardware"] as Obj)["accelerator"] = 1;
      rec(t, 2)["role"] = "prefill";
    });
    expectIssue(issues, { file: "fleet.json", path: "$.hardware.accelerator", rule: "schema" });
    expectIssue(issues, { path: '$.engines["engine-2"].role', rule: "role-matches-fleet" });
    expect(issues.filter((i) => i.rule.includes("hardware"))).toEqual([]);
  });

  it('a broken node record does not make its engines "on no node"', async () => {
    const issues = await issuesOf((t) => {
      (t.fleet["nodes"] as Obj[]).push({ name: "gpu-b", engines: ["n2"], sysfs_root: "" });
      (t.fleet["nodes"] as Obj[])[0]!["engines"] = ["n1"];
    });
    expectIssue(issues, { file: "fleet.json", path: "$.nodes[1].sysfs_root", rule: "schema" });
    expect(only(issues, "engine-on-one-node")).toEqual([]);
  });
});
