// A state file for a generated desired tree (bench/fleet-gen.mjs) as a controller leaves it after converging:
// every engine captured, applied and running at its desired input hash, its handle naming one live process
// (`process`: pid, start ticks; the boot id is this machine's), so `status` checks 1000 live handles and
// `plan` of an unchanged tree has nothing to do, without starting 1000 engines.
//
// Written as narwhal.json in one write (the store would write a journal line per record), as a controller's
// compaction leaves it: the current STATE_VERSION, compact, sealed (src/state/state-seal.ts), after the records
// passed the state file's schema, so a reader trusts it as it trusts a controller's. (Before 2026-12-06 it was
// written as version 1, unsealed: every read checked all 1000 records with zod, which no controller's file costs.)
// Beside it, state/desired-summary.json as the controller records it when it applies the desired state (what
// `status` reads instead of validating desired/ again while it is unchanged).
import fs from "node:fs/promises";
import path from "node:path";
import { writeDesiredSummary } from "../dist/src/state/desired-summary.js";
import { sealJson } from "../dist/src/state/state-seal.js";
import { STATE_VERSION, StateFileSchema } from "../dist/src/state/state-file.js";
import { procStatFields } from "./measure.mjs";

/** start_ticks of a process: field 22 of /proc/<pid>/stat, counted after the parenthesised command name. */
const startTicks = (pid) => Number(procStatFields(pid)[19]);

/**
 * @param {string} stateDir created if missing
 * @param {import("../dist/src/desired/types.js").DesiredState} desired loadDesired's result
 * @param {number} pid a live process every handle names
 */
export async function writeFleetState(stateDir, desired, pid) {
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const bootId = (await fs.readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim();
  const ticks = startTicks(pid);
  const at = new Date().toISOString();
  const engines = {};
  for (const [i, spec] of desired.specs.entries()) {
    const node = `node-${Math.floor(i / 2) + 1}`;
    engines[spec.name] = {
      engine: spec.name,
      backend: "native",
      phase: "captured",
      desired_hash: spec.input_hash,
      running_hash: spec.input_hash,
      group_signature: "5d1f0c2b9e7a4410",
      run_dir: path.join(stateDir, "runs", spec.name, "20261201T000000Z-bench"),
      plan_sha256: "0".repeat(64),
      handle: { kind: "native", pid, pgid: pid, boot_id: bootId, start_ticks: ticks, launch_token: `bench-${i}`, node },
      inspection: null,
      checked: null,
      layout: null,
      conditions: [{ type: "Ready", status: "True", reason: "Captured", message: "bench", lastTransitionTime: at }],
      last_error: null,
      attempts: 0,
      retry_at: null,
      history: ["pending", "inspecting", "preparing", "checking", "starting", "probing", "capturing", "captured"]
        .slice(1)
        .map((to, j, all) => ({ at, from: j === 0 ? "pending" : all[j - 1], to })),
      snapshot: null,
      updated_at: at,
      role: spec.role,
      observed_at: at,
    };
  }
  const state = { version: STATE_VERSION, engines, proofs: {}, journal_seq: 0 };
  const checked = StateFileSchema.safeParse(state);
  if (!checked.success)
    throw new Error(`bench state: ${checked.error.issues[0]?.message} at ${checked.error.issues[0]?.path}`);
  await fs.writeFile(path.join(stateDir, "narwhal.json"), sealJson(JSON.stringify(state), STATE_VERSION), {
    mode: 0o600,
  });
  await writeDesiredSummary(stateDir, desired);
}
