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
