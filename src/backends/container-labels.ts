// The labels narwhal puts on everything it creates (DESIGN.md "Interfaces that
// must stay stable"), and image-reference parsing. Containers without these
// labels are never touched.
import type { PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";

export const LABEL = {
  engine: "io.narwhal.engine",
  inputHash: "io.narwhal.input-hash",
  token: "io.narwhal.launch-token",
  run: "io.narwhal.run",
  /** Scopes ownership: two controllers with different state directories never adopt each other's containers. */
  state: "io.narwhal.state",
  purpose: "io.narwhal.purpose",
} as const;

export function engineLabels(run: PreparedRun, plan: LaunchPlan, stateDir: string): Record<string, string> {
  return {
    [LABEL.engine]: run.engine,
    [LABEL.inputHash]: plan.input_hash,
    [LABEL.token]: run.launch_token,
    [LABEL.run]: run.dir,
    [LABEL.state]: stateDir,
    [LABEL.purpose]: "engine",
  };
}

/** `token` is the inspection's own (never the run's launch token): cleanup after a deadline finds the container by it. */
export function checkLabels(run: PreparedRun, stateDir: string, token: string): Record<string, string> {
  return {
    [LABEL.engine]: run.engine,
    [LABEL.token]: token,
    [LABEL.run]: run.dir,
    [LABEL.state]: stateDir,
    [LABEL.purpose]: "check",
  };
}

/** `sha256:<64 hex>` (or bare 64 hex) is an image id; `name@sha256:<64 hex>` pins a registry digest. */
export function parseImageRef(ref: string): { id?: string; digest?: string } {
  if (/^sha256:[0-9a-f]{64}$/.test(ref)) return { id: ref };
  if (/^[0-9a-f]{64}$/.test(ref)) return { id: `sha256:${ref}` };
  const at = ref.lastIndexOf("@");
  if (at > 0 && /^sha256:[0-9a-f]{64}$/.test(ref.slice(at + 1))) return { digest: ref.slice(at + 1) };
  return {};
}
