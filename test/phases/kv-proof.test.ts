// The KV proof's verdict (which check fails first names the cause), its
// localhost rule, the "about the prompt length" bound, the evidence naming and
// the run-directory errors, on counters captured from real simulator runs.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  externalTokensExpected,
  isLoopbackHost,
  judgeProof,
  type ProofObservation,
} from "../../src/phases/kv-proof-checks.js";
import { writeEvidence } from "../../src/phases/kv-proof-evidence.js";
import { readProofEnd } from "../../src/phases/kv-proof-end.js";
import { NarwhalError } from "../../src/errors.js";
import { capturedCounters, checkedRunDir } from "./kv-fixtures.js";

const ok = { ok: true, status: 200, detail: "answered 200" };
const moved = capturedCounters("decode-1-after-3-transfers");

/** A pair that passed: the decode's counters moved as three real transfers moved them. */
function good(): ProofObservation {
  return {
    prefill: { engine: "engine-1", node: "a" },
    decode: { engine: "engine-2", node: "b" },
    block_size: 16,
    prompt_tokens: moved.external,
    reference: ok,
    prefill_request: ok,
    side_channel: { host: "10.0.0.11", port: 5600, source: "kv_transfer_params" },
    metrics_error: null,
    before: { prefill: capturedCounters("prefill-after-9-prefills"), decode: capturedCounters("decode-0-fresh") },
    after: { prefill: capturedCounters("prefill-after-9-prefills"), decode: moved },
    decode_request: ok,
    side_channel_reachable: null,
    decode_log_line: null,
    compat_hashes: { prefill: "aa", decode: "aa" },
    decode_text: " tide harbor",
    reference_text: " tide harbor",
  };
}

const fail500 = { ok: false, status: 500, detail: "answered HTTP 500" };

/** The decode failed (STATUS, null: no answer) with nothing counted; the controller could open the side channel, or not. */
const uncounted = (status: number | null, reachable: boolean | null) => (o: ProofObservation) => {
  o.decode_request = { ok: false, status, detail: status === null ? "timed out" : `answered HTTP ${status}` };
  o.after!.decode = o.before!.decode;
  o.side_channel_reachable =
    reachable === null ? null : { ok: reachable, detail: reachable ? "accepts" : "ECONNREFUSED" };
};

describe("judgeProof: the first failing check names the cause", () => {
  const table: Array<[string, (o: ProofObservation) => void, string | null]> = [
    ["everything moved", () => {}, null],
    [
      "the reference request failed",
      (o) => void (o.reference = { ok: false, status: null, detail: "refused" }),
      "request-failed",
    ],
    [
      "the prefill answered 401",
      (o) => void (o.prefill_request = { ok: false, status: 401, detail: "401" }),
      "request-failed",
    ],
    [
      "a loopback side channel across nodes",
      (o) => void (o.side_channel!.host = "127.0.0.1"),
      "side-channel-localhost",
    ],
    [
      "an unset side channel host across nodes (vLLM's localhost)",
      (o) => void (o.side_channel!.host = ""),
      "side-channel-localhost",
    ],
    ["loopback on one node is fine", (o) => void ((o.side_channel!.host = "localhost"), (o.decode.node = "a")), null],
    [
      "/metrics unreadable",
      (o) => void ((o.metrics_error = "no series"), (o.before = null), (o.after = null)),
      "metrics-unreadable",
    ],
    [
      "a 500 with a failed transfer counted",
      (o) =>
        void ((o.decode_request = fail500), (o.after!.decode = capturedCounters("decode-failing-after-3-requests"))),
      "transfer-failed",
    ],
    ["a 500 with nothing counted, side channel open: the handshake", uncounted(500, true), "handshake-refused"],
    ["a 500 with nothing counted, side channel closed", uncounted(500, false), "side-channel-unreachable"],
    ["no answer from the decode, side channel closed", uncounted(null, false), "side-channel-unreachable"],
    ["no answer from the decode, side channel open", uncounted(null, true), "request-failed"],
    [
      "a decode 404 (wrong model)",
      (o) => void (o.decode_request = { ok: false, status: 404, detail: "404" }),
      "request-failed",
    ],
    [
      "200 under policy recompute with failures counted",
      (o) => void (o.after!.decode = capturedCounters("decode-failing-after-3-requests")),
      "transfer-failed",
    ],
    [
      "the prefill expired a request",
      (o) => void (o.after!.prefill = capturedCounters("prefill-after-3-expired")),
      "expired",
    ],
    [
      "200, the right text, computed locally",
      (o) => void (o.after!.decode = capturedCounters("decode-silent-after-3-requests")),
      "silent-recompute",
    ],
    ["bytes moved, the text differs", (o) => void (o.decode_text = " cold far"), "corrupted-blocks"],
    [
      "expired outranks silent recompute (the unread blocks expire because the decode recomputed)",
      (o) =>
        void (
          (o.after!.decode = capturedCounters("decode-silent-after-3-requests")),
          (o.after!.prefill = capturedCounters("prefill-after-3-expired"))
        ),
      "expired",
    ],
  ];
  it.each(table)("%s", (_name, edit, cause) => {
    const o = good();
    edit(o);
    const verdict = judgeProof(o);
    expect(verdict.cause).toBe(cause);
    expect(verdict.passed).toBe(cause === null);
    expect(verdict.message).toContain("engine-1");
    expect(verdict.message).toContain("engine-2");
    if (cause) {
      expect(verdict.message).toContain(cause);
      expect(verdict.message).toContain("Fix:");
      expect(verdict.checks.find((c) => !c.passed)?.cause).toBe(cause);
    }
  });

  const messages: Array<[string, (o: ProofObservation) => void, string[]]> = [
    [
      "the localhost trap names the host:port and the fix",
      (o) => void (o.side_channel = { host: "127.0.0.1", port: 18521, source: "kv_transfer_params" }),
      ["127.0.0.1:18521", "NARWHAL_NODE_<n>_IP"],
    ],
    [
      "a handshake failure quotes the decode's log line and the differing nixl-compat hashes",
      (o) =>
        void (
          (o.decode_request = fail500),
          (o.after!.decode = o.before!.decode),
          (o.decode_log_line = "RuntimeError: NIXL compatibility hash mismatch. Local: a, Remote: b."),
          (o.compat_hashes = { prefill: "b", decode: "a" })
        ),
      ["NIXL compatibility hash mismatch. Local: a, Remote: b.", "prefill hash b, decode hash a"],
    ],
  ];
  it.each(messages)("%s", (_name, edit, wanted) => {
    const o = good();
    edit(o);
    const { message } = judgeProof(o);
    for (const w of wanted) expect(message).toContain(w);
  });

  it("a proof that stopped early never passes", () => {
    const o = good();
    o.decode_request = null;
    o.decode_text = null;
    o.after = null;
    expect(judgeProof(o)).toMatchObject({ passed: false, cause: "request-failed" });
  });
});

describe("the rules the checks apply", () => {
  it.each([
    ["localhost", true],
    ["127.0.0.1", true],
    ["127.1.2.3", true],
    ["::1", true],
    ["[::1]", true],
    ["0.0.0.0", true],
    ["", true],
    ["10.201.3.11", false],
    ["fd00::11", false],
    ["prefill-1.example", false],
  ])("isLoopbackHost(%j) = %s", (host, loop) => expect(isLoopbackHost(host)).toBe(loop));

  it("about the prompt length: at most one block short of it, never more than it", () => {
    expect(externalTokensExpected(97, 16)).toEqual({ min: 81, max: 97 });
    expect(externalTokensExpected(10, 16)).toEqual({ min: 1, max: 10 });
  });
});

describe("evidence and run directories", () => {
  it("kv-transfer.json is written exclusively; a later proof takes the next fresh name", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "kv-evidence-"));
    const first = await writeEvidence(dir, "engine-1", { n: 1 });
    const second = await writeEvidence(dir, "engine-1", { n: 2 });
    expect([path.basename(first), path.basename(second)]).toEqual(["kv-transfer.json", "kv-transfer.2.json"]);
    expect(JSON.parse(await fs.readFile(first, "utf8"))).toEqual({ n: 1 });
    expect((await fs.stat(second)).mode & 0o777).toBe(0o600);
  });

  it("a run directory of another launch is refused, terminal; the key is read, never returned in the plan", async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), "kv-end-"));
    const end = await checkedRunDir(root, {
      engine: "engine-2",
      endpoint: "http://127.0.0.1:1",
      servedName: "tiny",
      sideChannelHost: "127.0.0.1",
      sideChannelPort: 5600,
      node: null,
      apiKey: "k-123",
    });
    const read = await readProofEnd(end);
    expect(read.headers).toEqual({ Authorization: "Bearer k-123" });
    expect(read).toMatchObject({ block_size: 16, side_channel_host: "127.0.0.1", side_channel_port: 5600 });
    const err = await readProofEnd({ ...end, launch_token: "other" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NarwhalError);
    expect((err as NarwhalError).retryable).toBe(false);
    expect((err as NarwhalError).message).toContain("not engine-2's run other");
    const gone = await readProofEnd({ ...end, run_dir: path.join(root, "missing") }).catch((e: unknown) => e);
    expect((gone as NarwhalError).retryable).toBe(false);
  });
});
