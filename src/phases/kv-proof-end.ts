// One end of a KV proof as its run directory records it: the checked plan
// (endpoint, served name, side channel, block size) and the API key, read
// with the helpers every step after check uses. The key stays in memory, in
// the request headers only: it is never logged or written into evidence.
import type { LaunchPlan } from "./plan.js";
import { lastFlagValue } from "./plan.js";
import { ENV_FILES, runKeyHeaders } from "./run-env.js";
import { loadCheckedRun } from "./checked-run.js";
import { refusal } from "./action-error.js";
import { planHasKey } from "./key-enforcement.js";
import type { ProofEnd } from "./kv-proof.js";

export const KV_PROOF_ACTION = "kv-proof";
/** vLLM's default block size, when the plan's command does not set --block-size. */
const DEFAULT_BLOCK_SIZE = 16;

export interface ReadEnd {
  end: ProofEnd;
  plan: LaunchPlan;
  /** Authorization for /v1 when the plan has a key; empty otherwise. */
  headers: Record<string, string>;
  block_size: number;
  /** VLLM_NIXL_SIDE_CHANNEL_HOST as planned ("" when unset: vLLM then binds and advertises localhost). */
  side_channel_host: string;
  side_channel_port: number;
}

/**
 * The end's checked plan (launch.json bound by checked.json, and of the launch token the caller
 * names) and its key. Not the pair's fault, so it throws: a missing or edited run directory is
 * terminal (a fresh run is needed), an unreadable key file is retryable (it is read again next time).
 */
export async function readProofEnd(end: ProofEnd): Promise<ReadEnd> {
  const { plan } = await loadCheckedRun(KV_PROOF_ACTION, end.run_dir);
  if (plan.engine !== end.engine || plan.launch_token !== end.launch_token)
    throw refusal(
      KV_PROOF_ACTION,
      `${end.run_dir} holds ${plan.engine}'s plan with launch token ${plan.launch_token}, not ${end.engine}'s run ${end.launch_token}`,
      {
        engine: end.engine,
        run: end.run_dir,
        input: "launch_token",
        fix: "Prove the pair from the run directories the state records for the engines now running.",
      },
    );
  let headers: Record<string, string> = {};
  if (planHasKey(plan)) {
    try {
      headers = await runKeyHeaders(end.run_dir);
    } catch (err) {
      const names = ENV_FILES.join(" / ");
      throw refusal(KV_PROOF_ACTION, `${names} in ${end.run_dir} is unreadable: ${(err as Error).message}`, {
        engine: end.engine,
        run: end.run_dir,
        input: names,
        retryable: true,
        fix: `Restore read access to the environment file (${names}) in ${end.run_dir} (the engine's key lives there).`,
      });
    }
  }
  const block = Number(lastFlagValue(plan.command, "--block-size"));
  return {
    end,
    plan,
    headers,
    block_size: Number.isInteger(block) && block > 0 ? block : DEFAULT_BLOCK_SIZE,
    side_channel_host: plan.environment.VLLM_NIXL_SIDE_CHANNEL_HOST ?? "",
    side_channel_port: Number(plan.environment.VLLM_NIXL_SIDE_CHANNEL_PORT ?? plan.ports.nixl_side_channel),
  };
}
