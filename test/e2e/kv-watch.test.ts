// Issue 11 items 4 and 5 through the real CLI in watch mode: a restarted
// prefill makes its decode prove again before the pair serves (a decode with
// stale peer metadata is restarted and proves again), and the periodic scrape
// catches a decode that silently stopped receiving KV. A slow proof holds up
// neither the fleet's planning nor its engines' steps (one slot per lane).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { kvOf, startCli, teardown, waitFor } from "./cli.js";
import { readState, type EngineRecord, type StateFile } from "../../src/state/store.js";
import { readServingFleet } from "../../src/controller/serving-file.js";

const KEY = "e2e-key-0123456789";
const proven = (s: StateFile, name: string) => kvOf(s.engines[name])?.status === "True";
const pidOf = (e: EngineRecord | undefined) => (e?.handle?.kind === "native" ? e.handle.pid : null);

/** One request as a P/D router sends it: the prefill with do_remote_decode, then the decode with what it returned. */
async function routerRequest(fleet: SimFleet, prompt: string): Promise<void> {
  // A decode being restarted refuses the connection: the router's request is simply lost.
  const post = async (port: number, body: object) => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify(body),
    });
    return (await res.json()) as { kv_transfer_params?: Record<string, unknown> };
  };
  const base = { model: "tiny-llama", prompt, temperature: 0 };
  const pre = await post(fleet.ports[0]![0]!, {
    ...base,
    max_tokens: 1,
    kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false },
  });
  await post(fleet.ports[1]![0]!, { ...base, max_tokens: 8, kv_transfer_params: pre.kv_transfer_params });
}

const tryRouterRequest = (fleet: SimFleet, prompt: string) => routerRequest(fleet, prompt).catch(() => undefined);

describe("watch mode keeps proving the KV path", () => {
  let fleet: SimFleet;
  let controller: ChildProcess;
  let faultsFile: string;
  let log = "";
  const state = () => readState(fleet.stateDir);
  const listedAgain = () =>
    waitFor("the proven pair listed again", async () =>
      (await readServingFleet(fleet.stateDir))?.pairs?.length === 1 ? true : undefined,
    );

  beforeAll(async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-kv-faults-"));
    faultsFile = path.join(root, "faults");
    await fs.writeFile(faultsFile, "");
    // Switches arrive through one file both engines read (scoped to one engine by name): one runtime environment, one group.
    const environment = { NARWHAL_SIM_FAULTS_FILE: faultsFile };
    fleet = await simFleet({ engines: [{ environment }, { environment }], kvTransfer: { watch_interval_s: 1 } });
    // Each kill and each decode restart spends an attempt of that engine: more than the tests' default 2.
    // One slot per lane: a proof that holds the KV lane must not hold up an engine's step.
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], {
      NARWHAL_RETRY_MAX_ATTEMPTS: "8",
      NARWHAL_CONCURRENCY: "1",
    });
    controller.stdout!.on("data", (d) => (log += d));
    controller.stderr!.on("data", (d) => (log += d));
    await waitFor(
      "both proven",
      async () => {
        const s = await state();
        return proven(s, "engine-1") && proven(s, "engine-2");
      },
      120_000,
    );
  });
  afterAll(async () => {
    if (controller?.exitCode === null) controller.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  it("a prefill restart makes its decode prove again, the decode keeps running", async () => {
    const before = await state();
    const decodePid = pidOf(before.engines["engine-2"]);
    const first = before.proofs!["engine-1>engine-2"]!;
    process.kill(-pidOf(before.engines["engine-1"])!, "SIGKILL");
    const after = await waitFor(
      "the pair proven with the new prefill",
      async () => {
        const s = await state();
        const p = s.proofs?.["engine-1>engine-2"];
        return p && p.passed && p.prefill.launch_token !== first.prefill.launch_token && proven(s, "engine-2")
          ? s
          : undefined;
      },
      120_000,
    );
    expect(pidOf(after.engines["engine-2"])).toBe(decodePid);
    expect(after.proofs!["engine-1>engine-2"]!.decode.launch_token).toBe(first.decode.launch_token);
    await listedAgain();
  });

  it("with stale peer metadata the decode fails the new proof, is restarted, and the pair proves again", async () => {
    // The decode caches its peers by address from now on; then its prefill restarts.
    await fs.writeFile(faultsFile, "kv_stale_peer_metadata@engine-2\n");
    await routerRequest(fleet, "The tide comes in and the tide goes out, and the harbour fills with boats");
    const now = await state();
    const decodeToken = now.engines["engine-2"]!.handle!.launch_token;
    process.kill(-pidOf(now.engines["engine-1"])!, "SIGKILL");
    const healed = await waitFor(
      "the decode restarted and the pair proven again",
      async () => {
        const s = await state();
        const p = s.proofs?.["engine-1>engine-2"];
        return p?.passed && p.decode.launch_token !== decodeToken && proven(s, "engine-1") ? s : undefined;
      },
      180_000,
    );
    const history = healed.engines["engine-2"]!.history.map((h) => h.note ?? "").join("\n");
    expect(history).toMatch(/engine-1/);
    await listedAgain();
  });

  it("a prefill lost during a slow proof is restarted at once, and the proof it broke is not recorded", async () => {
    // The decode's KV reads now hang (a slow fabric); a prefill restart makes it prove again.
    await fs.writeFile(faultsFile, "kv_slow=600@engine-2\n");
    const before = await state();
    const from = log.length;
    process.kill(-pidOf(before.engines["engine-1"])!, "SIGKILL");
    await waitFor("the slow proof under way", async () =>
      log.slice(from).includes("proving KV transfer from engine-1") ? true : undefined,
    );
    const proving = await state();
    // Lost again while the proof holds the KV lane's one slot: its restart runs in the engines' lane.
    process.kill(-pidOf(proving.engines["engine-1"])!, "SIGKILL");
    const restarted = await waitFor("the prefill restarted during the proof", async () => {
      const s = await state();
      const e = s.engines["engine-1"]!;
      return e.phase === "captured" && e.handle?.launch_token !== proving.engines["engine-1"]!.handle?.launch_token
        ? s
        : undefined;
    });
    // The proof is still held: nothing of it is recorded yet. Its log from the line that began it: a proof of the
    // test before may finish (and say so) after this test's start, before the kill.
    expect(restarted.proofs!["engine-1>engine-2"]).toEqual(proving.proofs!["engine-1>engine-2"]);
    const began = log.indexOf("proving KV transfer from engine-1", from);
    expect(log.slice(began)).not.toMatch(/KV transfer from engine-1 (proven|failed)/);
    // The fabric recovers: the held read fails against the prefill it named (gone), and that says nothing of the new one.
    await fs.writeFile(faultsFile, "");
    await waitFor(
      "the pair proven with the restarted prefill",
      async () => {
        const s = await state();
        const p = s.proofs?.["engine-1>engine-2"];
        return p?.passed && p.prefill.launch_token === restarted.engines["engine-1"]!.handle!.launch_token
          ? s
          : undefined;
      },
      120_000,
    );
    expect(log.slice(from)).not.toMatch(/failed its proof/);
    await listedAgain();
  });

  it("the scrape catches a decode that silently recomputes: KVTransfer=False, the pair leaves the serving fleet", async () => {
    await fs.writeFile(faultsFile, "kv_silent_recompute@engine-2\n");
    // Router traffic while the decode recomputes: local compute grows, external KV stays flat.
    const caught = await waitFor(
      "the scrape's finding",
      async () => {
        await tryRouterRequest(fleet, "The sea is wide and the ships are many, and every one of them sails");
        const s = await state();
        return kvOf(s.engines["engine-2"])?.reason === "SilentRecompute" ? s : undefined;
      },
      60_000,
    );
    expect(kvOf(caught.engines["engine-2"])?.status).toBe("False");
    await waitFor("the pair out of the serving fleet", async () =>
      (await readServingFleet(fleet.stateDir))?.pairs?.length === 0 ? true : undefined,
    );
  });
});
