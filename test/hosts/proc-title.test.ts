// An engine that sets its process title is still found by its variables. narwhal finds a native engine
// again by NARWHAL_* in /proc/<pid>/environ of its group leader; py-setproctitle (a vLLM dependency) writes
// the title over that memory unless SPT_NOENV is set, which every launch plan's environment sets. Real
// processes and Debian's python3-setproctitle (installed here when missing, as the rig installs sshd).
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import { buildLaunchPlan } from "../../src/phases/plan.js";
import { planInputs } from "../phases/plan-fixtures.js";
import { until } from "./contract.js";

const PYTHON = "/usr/bin/python3";
const host = new LocalHost("title-test", { PATH: "/usr/local/bin:/usr/bin:/bin" });
let dir = "";

/** Debian's python3 with setproctitle, installed with apt-get when it lacks it (root on Debian only). */
async function ensureSetproctitle(): Promise<void> {
  const has = async () => (await host.run([PYTHON, "-c", "import setproctitle"])).code === 0;
  if (await has()) return;
  if (process.getuid?.() !== 0 || !existsSync("/etc/debian_version"))
    throw new Error(
      `${PYTHON} lacks setproctitle: install python3-setproctitle (the test installs it as root on Debian)`,
    );
  const apt = (...args: string[]) =>
    host.run(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", "DPkg::Lock::Timeout=300", ...args], {
      timeoutMs: 900_000,
    });
  const install = ["install", "-y", "--no-install-recommends", "python3-setproctitle"];
  if ((await apt(...install)).code !== 0) await apt("update"); // a fresh image has no package lists yet
  const r = await apt(...install);
  if (r.code !== 0 || !(await has()))
    throw new Error(`apt-get install python3-setproctitle failed (exit ${r.code}): ${r.stderr.trim().slice(-600)}`);
}

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-title-"));
  await ensureSetproctitle();
}, 960_000);
afterAll(async () => {
  await host.close();
  await fs.rm(dir, { recursive: true, force: true });
});

/** A session leader that sets its title as vLLM's API server once did, with `env`; what a scan finds of it. */
async function titledLeader(name: string, env: Record<string, string>): Promise<Record<string, string> | undefined> {
  const log = path.join(dir, `${name}.log`);
  const script = [
    "import setproctitle, sys, time",
    'setproctitle.setproctitle("VLLM::APIServer")',
    'print("titled", flush=True)',
    "time.sleep(300)",
  ].join("\n");
  const { pid } = await host.spawnDetached([PYTHON, "-c", script], { env, cwd: dir, logFile: log });
  try {
    await until(`${name} to set its title`, async () => (await fs.readFile(log, "utf8")).includes("titled"));
    const title = (await fs.readFile(`/proc/${pid}/cmdline`, "utf8")).replace(/\0+$/, "");
    expect(title).toBe("VLLM::APIServer");
    return (await host.scanLeaders(["NARWHAL_LAUNCH_TOKEN"])).envs.get(pid);
  } finally {
    await host.run(["kill", "--", `-${pid}`]);
  }
}

describe("an engine that sets its process title (py-setproctitle)", () => {
  it("keeps the variables narwhal finds it by with the launch plan's environment, and loses them without", async () => {
    const { plan } = buildLaunchPlan(planInputs());
    expect(plan.environment.SPT_NOENV).toBe("1");
    const token = `token-${process.pid}`;
    const withPlan = await titledLeader("planned", {
      NARWHAL_LAUNCH_TOKEN: token,
      SPT_NOENV: plan.environment.SPT_NOENV ?? "",
    });
    expect(withPlan).toEqual({ NARWHAL_LAUNCH_TOKEN: token });
    // The hazard itself: without it the title takes the environment's memory and the engine is not found.
    const without = await titledLeader("unplanned", { NARWHAL_LAUNCH_TOKEN: token });
    expect(without?.NARWHAL_LAUNCH_TOKEN).toBeUndefined();
  });
});
