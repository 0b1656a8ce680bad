// seed 000: "A changed launcher requires a new prepared run so deployed snapshot and digest match
// the management checkout". A fleet converged by "another launcher" (this narwhal's scripts, copied,
// under another version: no repository file is edited) is not reused by this one: `narwhal plan`
// names the launcher as what forces each replacement, `reconcile --once` re-prepares every engine
// into a fresh run directory made by this launcher, and the old run directories stay as they were.
import { copyFile, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { packageRoot, runningLauncher } from "../../src/app.js";
import { readLauncher, SHIPPED_SCRIPTS } from "../../src/launcher.js";
import type { LaunchPlan } from "../../src/phases/plan.js";
import { runsRoot } from "../../src/state/run-dir.js";
import { ControllerHarness } from "./controller-harness.js";
import { runCli, teardown } from "./cli.js";

const BOTH = ["engine-1", "engine-2"];
let harness: ControllerHarness | undefined;
let scripts: string | undefined;
afterEach(async () => {
  if (harness) await teardown(harness.fleet.stateDir);
  harness = undefined;
  if (scripts) await rm(scripts, { recursive: true, force: true });
});

/** Another launcher: a copy of the shipped scripts, under a version this narwhal is not. */
async function otherLauncher() {
  scripts = await mkdtemp(path.join(tmpdir(), "narwhal-other-launcher-"));
  for (const rel of SHIPPED_SCRIPTS) {
    await mkdir(path.dirname(path.join(scripts, rel)), { recursive: true });
    await copyFile(path.join(packageRoot(), rel), path.join(scripts, rel));
  }
  return readLauncher(scripts, "0.0.0-other");
}

const planOf = async (stateDir: string, engine: string, run: string) =>
  JSON.parse(await readFile(path.join(runsRoot(stateDir, engine), run, "launch.json"), "utf8")) as LaunchPlan;

describe("a changed launcher", () => {
  it("is not reused: plan says the launcher forces replacement, reconcile re-prepares every engine", async () => {
    const other = await otherLauncher();
    const ours = runningLauncher();
    expect(other.digest).not.toBe(ours.digest);
    harness = await ControllerHarness.create({ launcher: other });
    const h = harness;
    h.controller.apply(await h.desired());
    await h.untilCaptured(BOTH);
    await h.settle();
    const before = Object.fromEntries(BOTH.map((e) => [e, h.runDirs(e)]));
    for (const e of BOTH) {
      expect(before[e]).toHaveLength(1);
      expect((await planOf(h.fleet.stateDir, e, before[e]![0]!)).launcher).toEqual(other);
    }
    await h.detach(); // the engines keep running, prepared by the other launcher

    const args = ["--state", h.fleet.stateDir, "--desired", h.fleet.dir];
    const plan = await runCli(["plan", ...args]);
    expect(plan.code, plan.stderr).toBe(2);
    const lines = plan.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(
      `Launcher: narwhal ${ours.version}, digest ${ours.digest} (plan format ${ours.plan_format}; ${Object.entries(
        ours.scripts,
      )
        .map(([n, s]) => `${n} ${s.slice(0, 12)}`)
        .join(", ")})  (forces replacement: differs from the launcher of engine-1, engine-2)`,
    );
    expect(lines).toContain(`      launcher.digest: "${other.digest}" → "${ours.digest}"  (forces replacement)`);
    expect(lines).toContain(`      launcher.version: "0.0.0-other" → "${ours.version}"  (forces replacement)`);
    expect(lines.at(-1)).toBe("Plan: 2 to replace, 0 to create, 0 to remove.");
    // status ENGINE names the launcher of the plan the engine runs from, and says it is not this narwhal's.
    const stale = await runCli(["status", "engine-1", ...args]);
    expect(stale.stdout).toContain(
      `  launcher:      narwhal 0.0.0-other, digest ${other.digest} (not this narwhal's: a changed launcher requires a new prepared run`,
    );

    const reconcile = await runCli(["reconcile", "--once", ...args]);
    expect(reconcile.code, reconcile.stderr).toBe(0);
    for (const e of BOTH) {
      const runs = h.runDirs(e);
      const fresh = runs.filter((r) => !before[e]!.includes(r));
      expect(fresh, `${e} got a new prepared run`).toHaveLength(1);
      expect((await planOf(h.fleet.stateDir, e, fresh[0]!)).launcher).toEqual(ours);
    }
    const again = await runCli(["plan", ...args]);
    expect(again.code, again.stdout).toBe(0);
    expect(again.stdout.split("\n")[0]).not.toContain("forces replacement");
    const fresh = await runCli(["status", "engine-1", ...args]);
    expect(fresh.stdout).toContain(`  launcher:      narwhal ${ours.version}, digest ${ours.digest} (this narwhal's)`);
  });
});
