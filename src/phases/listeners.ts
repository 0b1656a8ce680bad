// Listener checks right before a manual start (seed 001 "Native port checks"):
// bind the HTTP endpoint from launch.json, the NIXL side-channel address from
// the engine environment and the attestation sidecar's address. Binding is the
// same kernel test inspection uses (host/ports.ts): a dual-stack "::" bind,
// then the planned address itself. The attestation URL given in the startup
// environment (NARWHAL_NODE_<n>_ATTESTATION_URL) takes precedence over the prepared one.
// The listeners are read and bound on the engine's node (`access`); the plan and
// its env file are the controller's own prepared run, read here.
import { parseEndpoint } from "../desired/urls.js";
import type { LaunchPlan } from "./plan.js";
import { readRunEnv } from "./run-env.js";
import { checkPlannedPorts, type PlannedPort } from "./host/ports.js";
import type { HostAccess } from "../hosts/types.js";

export interface ListenerCheck {
  purpose: "http" | "nixl side channel" | "attestation";
  host: string;
  port: number;
  /** Where the address came from: launch.json, engine.env / container.env or a variable. */
  source: string;
  free: boolean;
  error?: string;
}

/** NARWHAL_NODE_<n>_ATTESTATION_URL for engine-<n>. */
export function attestationVariable(engine: string): string | undefined {
  const k = /^engine-(\d+)$/.exec(engine)?.[1];
  return k === undefined ? undefined : `NARWHAL_NODE_${k}_ATTESTATION_URL`;
}

/** The attestation URL to check: the startup environment's, else the prepared one. */
export function attestationUrl(
  plan: LaunchPlan,
  env: Readonly<Record<string, string | undefined>>,
): { url: string; source: string } {
  const variable = attestationVariable(plan.engine);
  const override = variable ? env[variable] : undefined;
  return override
    ? { url: override, source: variable! }
    : { url: plan.attestation_url, source: "launch.json attestation_url" };
}

export async function checkListeners(
  access: HostAccess,
  runDir: string,
  plan: LaunchPlan,
  env: Readonly<Record<string, string | undefined>>,
): Promise<ListenerCheck[]> {
  // Seed 001: the NIXL address from engine.env (container.env for a container, or a run prepared before engine.env).
  const { file: envFile, env: engineEnv } = await readRunEnv(runDir);
  const wanted: Array<Omit<ListenerCheck, "free">> = [];
  const http = parseEndpoint(plan.endpoint);
  if (typeof http !== "string")
    wanted.push({ purpose: "http", host: http.host, port: http.port, source: "launch.json endpoint" });
  const nixlPort = Number(engineEnv.VLLM_NIXL_SIDE_CHANNEL_PORT ?? plan.ports.nixl_side_channel);
  // NIXL binds its side channel on every address (dual-stack) whatever host it advertises.
  wanted.push({
    purpose: "nixl side channel",
    host: "::",
    port: nixlPort,
    source: `${envFile} VLLM_NIXL_SIDE_CHANNEL_PORT`,
  });
  const att = attestationUrl(plan, env);
  const attEndpoint = att.url ? parseEndpoint(att.url) : "no attestation URL";
  if (typeof attEndpoint === "string") {
    wanted.push({
      purpose: "attestation",
      host: "",
      port: 0,
      source: att.source,
      error: `attestation URL ${JSON.stringify(att.url)}: ${attEndpoint}`,
    });
  } else wanted.push({ purpose: "attestation", host: attEndpoint.host, port: attEndpoint.port, source: att.source });

  const results: ListenerCheck[] = [];
  for (const w of wanted) {
    if (w.error) {
      results.push({ ...w, free: false });
      continue;
    }
    const planned: PlannedPort = { port: w.port, purpose: w.purpose, input: w.source };
    const [r] = await checkPlannedPorts(access, w.host, [planned]);
    results.push({ ...w, free: !!r?.free, ...(r?.error ? { error: r.error.message } : {}) });
  }
  return results;
}

/** One line per listener that blocks launch. */
export function blockedListeners(checks: ListenerCheck[]): string[] {
  return checks
    .filter((c) => !c.free)
    .map((c) =>
      c.error
        ? `${c.purpose} (${c.source}): ${c.error}`
        : `${c.purpose} port ${c.port} on ${c.host || "*"} (${c.source}) already has a listener`,
    );
}
