// Remote model code is the operator's choice (seed 003 lists "remote model code"
// among the uses of extra_args): --trust-remote-code in runtime.extra_args (or
// NARWHAL_ENGINE_ARGS) opts in, written out in full and without a value, so
// narwhal, the runtime check and vLLM's parser read the same decision. Nothing
// else turns it on: a checkpoint with an auto_map and no opt-in does not validate
// (prepare says which line to add after reviewing its code), and an opt-in for a
// checkpoint without one does not either. `--no-trust-remote-code` stays
// launcher-managed: leaving the opt-in out is how remote code stays off.
import { flagName } from "./launcher-managed.js";

export const TRUST_REMOTE_CODE = "--trust-remote-code";

/** Why an argument that speaks of --trust-remote-code is not the opt-in narwhal reads, or undefined. */
export function remoteCodeSpellingProblem(arg: string): string | undefined {
  const name = flagName(arg);
  if (name === undefined) return undefined;
  if (name === TRUST_REMOTE_CODE && arg.includes("="))
    return `${arg} gives ${TRUST_REMOTE_CODE} a value, which vLLM's parser refuses; write ${TRUST_REMOTE_CODE} alone to opt in, or leave it out`;
  // argparse would expand an abbreviation (allow_abbrev): narwhal reads only the full flag, so refuse it.
  if (name !== TRUST_REMOTE_CODE && name.startsWith("--trust") && TRUST_REMOTE_CODE.startsWith(name))
    return `${arg} abbreviates ${TRUST_REMOTE_CODE}; write the flag out in full`;
  return undefined;
}

/** The operator opted in to the checkpoint's remote code: `--trust-remote-code` (or `--trust_remote_code`) in the serving args. */
export function optsIntoRemoteCode(args: readonly string[]): boolean {
  return args.some((a) => flagName(a) === TRUST_REMOTE_CODE && !a.includes("="));
}
