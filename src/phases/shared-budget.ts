// What start-shared checks before it launches anything (seed 001 "Native
// shared startup"): two to eight checked plans on one GPU, with the same group,
// GPU UUID and device allowance, unique roles and ports, and a decimal sum of
// gpu_memory_utilization at most the allowance. Pure: plans in, budget or
// every problem out.
import type { LaunchPlan } from "./plan.js";
import { lastFlagValue } from "./plan.js";
import {
  addDecimals,
  compareDecimals,
  formatDecimal,
  integerDecimal,
  multiplyDecimals,
  parseDecimal,
  type Decimal,
} from "./decimal.js";

export const MIN_SHARED = 2;
export const MAX_SHARED = 8;

export interface SharedPlan {
  dir: string;
  plan: LaunchPlan;
}

export interface SharedBudget {
  gpu_uuid: string;
  /** shared_device.device_allowance as written, e.g. "0.3". */
  device_allowance: string;
  group_signature: string;
  /** Each engine's gpu_memory_utilization, in launch order. */
  utilizations: Array<{ engine: string; gpu_memory_utilization: string }>;
  /** Their exact decimal sum. */
  sum: string;
}

/** --gpu-memory-utilization as the serving command resolves it (the last one wins). */
export function planUtilization(plan: LaunchPlan): string | undefined {
  return (
    lastFlagValue(plan.command, "--gpu-memory-utilization") ?? lastFlagValue(plan.command, "--gpu_memory_utilization")
  );
}

/** Allowance × total device memory, exact: the most the sharing engines may add together. */
export function allowanceMib(allowance: string, totalMib: number): Decimal {
  return multiplyDecimals(parseDecimal(allowance)!, integerDecimal(totalMib));
}

function duplicates<T>(items: Array<{ engine: string; value: T }>): string[] {
  const seen = new Map<string, string>();
  const out: string[] = [];
  for (const { engine, value } of items) {
    const key = JSON.stringify(value);
    const first = seen.get(key);
    if (first !== undefined) out.push(`${engine} and ${first} both use ${String(value)}`);
    else seen.set(key, engine);
  }
  return out;
}

/** The shared budget of `members`, or the list of every reason they cannot start together. */
export function sharedBudget(
  members: SharedPlan[],
  backend: LaunchPlan["backend"],
): { budget?: SharedBudget; problems: string[] } {
  const problems: string[] = [];
  if (members.length < MIN_SHARED || members.length > MAX_SHARED) {
    problems.push(`start-shared takes ${MIN_SHARED} to ${MAX_SHARED} plans, got ${members.length}`);
  }
  const dirs = duplicates(members.map((m) => ({ engine: m.plan.engine, value: m.dir })));
  // One plan selected twice explains every other clash it would report.
  if (dirs.length)
    return { problems: [...problems, ...dirs.map((d) => `the same run directory is selected twice: ${d}`)] };
  for (const { plan } of members) {
    if (plan.backend !== backend)
      problems.push(
        `${plan.engine} is a ${plan.backend} plan; shared startup with --backend ${backend} requires every selected plan to use that backend`,
      );
    if (!plan.launch_record.shared_device)
      problems.push(`${plan.engine} has no shared_device block in its launch record`);
    if (plan.gpu.ids.length !== 1)
      problems.push(`${plan.engine} selects ${plan.gpu.ids.length} GPUs; a shared engine selects exactly one`);
  }
  const first = members[0]?.plan;
  const shared = first?.launch_record.shared_device;
  for (const { plan } of members.slice(1)) {
    const mine = plan.launch_record.shared_device;
    if (plan.group_signature !== first!.group_signature)
      problems.push(
        `${plan.engine} is in group ${plan.group_signature}, ${first!.engine} in ${first!.group_signature}: shared plans share their group`,
      );
    if (mine && shared && mine.gpu_uuid.toLowerCase() !== shared.gpu_uuid.toLowerCase())
      problems.push(`${plan.engine} shares GPU ${mine.gpu_uuid}, ${first!.engine} GPU ${shared.gpu_uuid}`);
    const a = mine && parseDecimal(mine.device_allowance);
    const b = shared && parseDecimal(shared.device_allowance);
    if (a && b && compareDecimals(a, b) !== 0)
      problems.push(
        `${plan.engine} has device_allowance ${mine!.device_allowance}, ${first!.engine} ${shared!.device_allowance}: shared plans share one allowance`,
      );
  }
  problems.push(
    ...duplicates(members.map((m) => ({ engine: m.plan.engine, value: m.plan.engine }))).map(
      (d) => `engine names must be unique: ${d}`,
    ),
  );
  problems.push(
    ...duplicates(members.map((m) => ({ engine: m.plan.engine, value: m.plan.role }))).map(
      (d) => `roles must be unique: ${d}`,
    ),
  );
  const ports = members.flatMap(({ plan }) =>
    [plan.ports.http, plan.ports.attestation, plan.ports.nixl_side_channel, ...plan.ports.transfer].map((value) => ({
      engine: plan.engine,
      value,
    })),
  );
  problems.push(...duplicates(ports).map((d) => `ports must be unique: ${d.replace(/use (\d+)$/, "use port $1")}`));

  const utilizations = members.map(({ plan }) => ({
    engine: plan.engine,
    gpu_memory_utilization: planUtilization(plan) ?? "",
  }));
  const parsed: Decimal[] = [];
  for (const [i, u] of utilizations.entries()) {
    if (!members[i]!.plan.launch_record.shared_device) continue; // reported above
    const d = parseDecimal(u.gpu_memory_utilization);
    if (!d || compareDecimals(d, integerDecimal(0)) <= 0 || compareDecimals(d, integerDecimal(1)) > 0) {
      problems.push(
        `${u.engine}: --gpu-memory-utilization ${u.gpu_memory_utilization || "(not set)"} is not a decimal fraction in (0, 1]; each shared engine states its share of device memory`,
      );
    } else parsed.push(d);
  }
  const allowance = shared ? parseDecimal(shared.device_allowance) : undefined;
  if (shared && !allowance)
    problems.push(`${first!.engine}: shared_device.device_allowance ${shared.device_allowance} is not a decimal`);
  const sum = addDecimals(parsed);
  if (allowance && parsed.length === members.length && compareDecimals(sum, allowance) > 0) {
    // The sum as it will be judged, term by term, so an operator sees which share to lower.
    problems.push(
      `the gpu_memory_utilization sum ${utilizations.map((u) => u.gpu_memory_utilization).join(" + ")} = ${formatDecimal(sum)} exceeds shared_device.device_allowance ${shared!.device_allowance}`,
    );
  }
  if (problems.length || !shared || !first) return { problems: [...new Set(problems)] };
  return {
    problems,
    budget: {
      gpu_uuid: shared.gpu_uuid,
      device_allowance: shared.device_allowance,
      group_signature: first.group_signature,
      utilizations,
      sum: formatDecimal(sum),
    },
  };
}
