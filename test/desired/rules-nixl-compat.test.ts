// pd-nixl-compatible: a P/D fleet whose every prefill/decode pair differs in a
// NIXL compatibility input vLLM hashes (vllm version, --model string, dtype,
// cache dtype, an attention backend the operator set) is invalid; one equal
// pair is enough, and an input desired does not fix is never compared.
import { describe, expect, it } from "vitest";
import type { ValidationIssue } from "../../src/errors.js";
import { fleetEngine, issuesOf, rec, runtime, type DesiredTree, type Obj } from "./fixtures.js";

const RULE = "pd-nixl-compatible";
const only = (issues: ValidationIssue[]) => issues.filter((i) => i.rule === RULE);
const env = (t: DesiredTree, k: number) => runtime(t, k)["environment"] as Obj;
const args = (t: DesiredTree, k: number) => runtime(t, k)["extra_args"] as string[];

describe(RULE, () => {
  it.each<[string, (t: DesiredTree) => void, RegExp]>([
    [
      "vLLM versions",
      (t) => ((runtime(t, 2)["expected_packages"] as Obj)["vllm"] = "0.11.1"),
      /vllm_version "0\.11\.0" vs "0\.11\.1" \(runtime\.expected_packages\.vllm\)/,
    ],
    ["model dtypes", (t) => (runtime(t, 2)["model_dtype"] = "float16"), /dtype "torch\.bfloat16" vs "torch\.float16"/],
    [
      "cache dtypes",
      (t) => (runtime(t, 1)["kv_cache_dtype"] = "fp8"),
      /cache_dtype "fp8" vs "auto" \(runtime\.kv_cache_dtype\)/,
    ],
    [
      // The same checkpoint, but vLLM hashes the --model string: "/model" in the container, the host path natively.
      "the --model string of a native prefill and a container decode",
      (t) => {
        rec(t, 1)["backend"] = "native";
        delete rec(t, 1)["image"];
      },
      /model "\/[^"]*\/models\/m" vs "\/model" \(backend/,
    ],
    [
      "attention backends both set",
      (t) => {
        env(t, 1)["VLLM_ATTENTION_BACKEND"] = "FLASHINFER";
        args(t, 2).push("--attention-backend", "FLASH_ATTN");
      },
      /attn_backend_name "FLASHINFER" vs "FLASH_ATTN"/,
    ],
  ])("differing %s is an error at the decode naming the input and the fix", async (_what, edit, message) => {
    const issues = only(await issuesOf(edit));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ file: "engine-launch.json", path: '$.engines["engine-2"]' });
    expect(issues[0]!.message).toMatch(/engine-1 \(prefill\) \/ engine-2 \(decode\)/);
    expect(issues[0]!.message).toMatch(message);
    expect(issues[0]!.message).toMatch(/give at least one prefill and one decode the same values/);
  });

  it.each<[string, (t: DesiredTree) => void]>([
    ["the valid fixture", () => {}],
    // Unset on one side is the platform default, which only the checked runtime can confirm.
    ["an attention backend set on one side only", (t) => (env(t, 1)["VLLM_ATTENTION_BACKEND"] = "FLASHINFER")],
    [
      "no decode role",
      (t) => {
        (runtime(t, 2)["expected_packages"] as Obj)["vllm"] = "0.11.1";
        fleetEngine(t, 1)["role"] = "prefill";
        rec(t, 2)["role"] = "prefill";
      },
    ],
  ])("%s passes", async (_what, edit) => {
    expect(only(await issuesOf(edit))).toEqual([]);
  });

  it("one compatible pair is enough: a second prefill that differs is not an error", async () => {
    const issues = await issuesOf((t) => {
      const second = structuredClone(rec(t, 1));
      second["gpu_ids"] = ["2"];
      second["accelerator_devices"] = ["/dev/nvidia2"];
      (second["runtime"] as Obj)["model_dtype"] = "float16";
      (t.launch["engines"] as Obj)["engine-3"] = second;
      (t.fleet["engines"] as Obj[]).push({
        iid: "n3",
        url: "${NARWHAL_NODE_3_URL}",
        attestation_url: "${NARWHAL_NODE_3_ATTESTATION_URL}",
        role: "prefill",
      });
      ((t.fleet["nodes"] as Obj[])[0]!["engines"] as string[]).push("n3");
      Object.assign(t.env, {
        NARWHAL_NODE_3_IP: "10.0.0.11",
        NARWHAL_NODE_3_ENGINE_PORT: "8002",
        NARWHAL_NODE_3_ATTEST_PORT: "8012",
        NARWHAL_NODE_3_NIXL_PORT: "5602",
      });
    });
    // The tree is otherwise valid, so a missing issue is this rule's decision, not a hole.
    expect(issues).toEqual([]);
  });
});

// The rules compare kinds of engines (equal compatibility inputs, TP, block size), not every prefill with
// every decode, so a 1000-engine fleet stays linear; every refused pair is still named, not one per kind.
describe("pd-handshake-tp over kinds of engines", () => {
  /** Engine k (3 and up) as a prefill like engine-1 on GPU k-1, edited by `edit`. */
  const addPrefill = (t: DesiredTree, k: number, edit: (r: Obj) => void = () => {}) => {
    const r = structuredClone(rec(t, 1));
    r["gpu_ids"] = [String(k - 1)];
    r["accelerator_devices"] = [`/dev/nvidia${k - 1}`];
    edit(r);
    (t.launch["engines"] as Obj)[`engine-${k}`] = r;
    (t.fleet["engines"] as Obj[]).push({
      iid: `n${k}`,
      url: `\${NARWHAL_NODE_${k}_URL}`,
      attestation_url: `\${NARWHAL_NODE_${k}_ATTESTATION_URL}`,
      role: "prefill",
    });
    ((t.fleet["nodes"] as Obj[])[0]!["engines"] as string[]).push(`n${k}`);
    Object.assign(t.env, {
      [`NARWHAL_NODE_${k}_IP`]: "10.0.0.11",
      [`NARWHAL_NODE_${k}_ENGINE_PORT`]: String(8000 + k),
      [`NARWHAL_NODE_${k}_ATTEST_PORT`]: String(8100 + k),
      [`NARWHAL_NODE_${k}_NIXL_PORT`]: String(5700 + k),
    });
  };
  const blockSize = (size: number) => (r: Obj) => ((r["runtime"] as Obj)["block_size"] = size);

  it("each prefill of a refused kind is named with the decode; prefills of an accepted kind and of other inputs are not", async () => {
    const issues = await issuesOf((t) => {
      addPrefill(t, 3, blockSize(32));
      addPrefill(t, 4);
      addPrefill(t, 5, blockSize(32));
      // Another dtype: never handshakes with engine-2, so its block size is pd-nixl-compatible's business.
      addPrefill(t, 6, (r) => {
        blockSize(32)(r);
        (r["runtime"] as Obj)["model_dtype"] = "float16";
      });
    });
    const tp = issues.filter((i) => i.rule === "pd-handshake-tp").map((i) => i.message.split(" agree")[0]);
    expect(tp).toEqual([
      "engine-3 (prefill, block size 32) and engine-2 (decode, block size 16)",
      "engine-5 (prefill, block size 32) and engine-2 (decode, block size 16)",
    ]);
    expect(issues.filter((i) => i.rule !== "pd-handshake-tp")).toEqual([]);
  });
});
