// Naming the input fields a change touches, from real engine specs hashed as
// the controller hashes them.
import { describe, expect, it } from "vitest";
import {
  describeFields,
  fieldDiff,
  isGroupField,
  predictedGroupKey,
  summarizeChange,
} from "../../src/controller/field-diff.js";
import { inputHashMaterial } from "../../src/desired/hash.js";
import { Secret } from "../../src/desired/types.js";
import { edit, specOf, withLaunch, withRuntime } from "./plan-fixtures.js";

const base = specOf(1, "prefill");
const diff = (change: Parameters<typeof edit>[1]) =>
  fieldDiff(inputHashMaterial(base), inputHashMaterial(edit(base, change)));

describe("fieldDiff", () => {
  it("finds nothing between equal inputs", () => {
    expect(fieldDiff(inputHashMaterial(base), inputHashMaterial(base))).toEqual([]);
  });

  it.each([
    [
      "an appended extra argument",
      (s: typeof base) => withRuntime(s, { extra_args: [...s.launch.runtime.extra_args, "--enforce-eager"] }),
      [
        {
          path: `launch.runtime.extra_args[${base.launch.runtime.extra_args.length}]`,
          old: null,
          new: "--enforce-eager",
          group: true,
        },
      ],
    ],
    [
      "the image",
      (s: typeof base) => withLaunch(s, { image: "registry.local/vllm:0.12.0@sha256:" + "f".repeat(64) }),
      [
        {
          path: "launch.image",
          old: "registry.local/vllm:0.11.0@sha256:" + "e".repeat(64),
          new: "registry.local/vllm:0.12.0@sha256:" + "f".repeat(64),
          group: true,
        },
      ],
    ],
    [
      "the tensor parallel size",
      (s: typeof base) => withLaunch(s, { tensor_parallel_size: 4 }),
      [{ path: "launch.tensor_parallel_size", old: 2, new: 4, group: true }],
    ],
    [
      "the model revision",
      (s: typeof base) => ({ ...s, model: { ...s.model, revision: "r2" } }),
      [{ path: "model.revision", old: "r1", new: "r2", group: true }],
    ],
    [
      "the transport",
      (s: typeof base) => withLaunch(s, { transfer: { ...s.launch.transfer, transport: "ucx_rdma" } }),
      [{ path: "launch.transfer.transport", old: "ucx_tcp", new: "ucx_rdma", group: true }],
    ],
    [
      "a runtime environment variable added",
      (s: typeof base) => withRuntime(s, { environment: { ...s.launch.runtime.environment, UCX_TLS: "tcp" } }),
      [{ path: "launch.runtime.environment.UCX_TLS", old: null, new: "tcp", group: true }],
    ],
    [
      "a package pin whose name is not an identifier",
      (s: typeof base) =>
        withRuntime(s, { expected_packages: { ...s.launch.runtime.expected_packages, "nixl-rocm": "0.6.1" } }),
      [{ path: 'launch.runtime.expected_packages["nixl-rocm"]', old: null, new: "0.6.1", group: true }],
    ],
    [
      "the GPUs (not a group field: a restart on other devices pairs as before)",
      (s: typeof base) => withLaunch(s, { gpu_ids: ["6", "7"] }),
      [
        { path: "launch.gpu_ids[0]", old: "2", new: "6", group: false },
        { path: "launch.gpu_ids[1]", old: "3", new: "7", group: false },
      ],
    ],
    [
      "the HTTP port",
      (s: typeof base) => ({ ...s, http_port: 8100 }),
      [{ path: "http_port", old: 8000, new: 8100, group: false }],
    ],
  ])("names %s by its JSON path, with old and new value", (_what, change, expected) => {
    expect(diff(change)).toEqual(expected);
  });

  it("never shows the API key digest, only that it changed", () => {
    const changes = diff((s) => ({ ...s, api_key: new Secret("sk-rotated") }));
    expect(changes).toEqual([{ path: "api_key_sha256", old: "(changed)", new: "(changed)", group: false }]);
    expect(JSON.stringify(changes)).not.toContain(inputHashMaterial(base)["api_key_sha256"] as string);
  });

  it("lists several changes in path order", () => {
    const paths = diff((s) => ({
      ...withLaunch(s, { image: "i2" }),
      model: { ...s.model, revision: "r9" },
      http_port: 9,
    })).map((c) => c.path);
    expect(paths).toEqual(["http_port", "launch.image", "model.revision"]);
  });
});

describe("summarizeChange / describeFields", () => {
  it("a change is incompatible when any changed field is a group field", () => {
    const applied = inputHashMaterial(base);
    expect(summarizeChange(applied, inputHashMaterial(edit(base, (s) => ({ ...s, http_port: 9 })))).group_changes).toBe(
      false,
    );
    expect(
      summarizeChange(applied, inputHashMaterial(edit(base, (s) => withLaunch(s, { image: "i2" })))).group_changes,
    ).toBe(true);
  });

  it("unrecorded applied inputs: fields unknown, assumed incompatible, and the description says so", () => {
    const s = summarizeChange(null, inputHashMaterial(base));
    expect(s).toEqual({ fields: null, group_changes: true });
    expect(describeFields(s)).toMatch(/not recorded.*cannot be named.*assumed to change the group signature/);
  });

  it("describes at most three fields and counts the rest", () => {
    const s = summarizeChange(
      inputHashMaterial(base),
      inputHashMaterial(edit(base, (x) => ({ ...withLaunch(x, { gpu_ids: ["6", "7"] }), http_port: 9, nixl_port: 7 }))),
    );
    expect(describeFields(s)).toBe(
      'http_port (8000 → 9), launch.gpu_ids[0] ("2" → "6"), launch.gpu_ids[1] ("3" → "7") and 1 more',
    );
  });
});

describe("group fields", () => {
  it.each([
    "launch.image",
    "launch.runtime.extra_args[3]",
    "launch.runtime.environment.X",
    "model.revision",
    "model.tree_sha256",
    "launch.transfer.transport",
    "backend",
    "python",
  ])("%s feeds the group signature", (p) => {
    expect(isGroupField(p)).toBe(true);
  });
  it.each([
    "launch.gpu_ids[0]",
    "launch.transfer.net_devices[0]",
    "model.served_name",
    "api_key_sha256",
    "launch.imagery",
    "http_port",
  ])("%s does not", (p) => {
    expect(isGroupField(p)).toBe(false);
  });

  it("predicts one group for engines that differ only in per-engine fields, another when a group field differs", () => {
    const a = inputHashMaterial(specOf(1, "prefill"));
    const b = inputHashMaterial(specOf(2, "decode"));
    expect(predictedGroupKey(a)).toBe(predictedGroupKey(b));
    expect(
      predictedGroupKey(
        inputHashMaterial(edit(specOf(2, "decode"), (s) => ({ ...s, model: { ...s.model, revision: "r2" } }))),
      ),
    ).not.toBe(predictedGroupKey(a));
  });
});
