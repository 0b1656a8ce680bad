// The whole checkpoint across the nodes of a fleet, through the controller on
// real simulator processes: every run records the checkpoint's manifest and
// tree digest; an engine re-inspected on another node after the checkpoint's
// files changed there holds another tree than the engines already running the
// same checkpoint, and fails inspection (outwaited) naming both nodes and both
// digests, while the others keep serving; once the files are restored it runs.
import { afterAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { REPO, simFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, status, teardown, waitFor } from "./cli.js";
import { MODEL_MANIFEST_FILE, type ModelManifest } from "../../src/phases/host/model-manifest.js";
import { readPlan } from "../../src/phases/prepare.js";

const readManifest = async (runDir: string) =>
  JSON.parse(await fs.readFile(path.join(runDir, MODEL_MANIFEST_FILE), "utf8")) as ModelManifest;

describe("one checkpoint on every node an engine runs on", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
  });

  it("fails the engine whose node holds another tree, naming both nodes and digests, and runs it once restored", async () => {
    const modelDir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-ckpt-model-"));
    await fs.cp(path.join(REPO, "test/sim/models/tiny-llama"), modelDir, { recursive: true });
    // engine-1 (prefill) and engine-2 (decode) on node "local", engine-3 (decode) on node "local-2".
    const fleet = await simFleet({ engines: [{}, {}, {}], modelDir, kvTransfer: { prove: false } });
    cleanup.push(
      () => fs.rm(modelDir, { recursive: true, force: true }),
      () => teardown(fleet.stateDir),
    );
    const once = (env: Record<string, string> = {}) =>
      runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env);

    const up = await once();
    expect(up.code, up.stderr.slice(-2000)).toBe(0);
    const before = await status(fleet.stateDir);
    const trees = new Set<string>();
    for (const e of before.engines) {
      const manifest = await readManifest(e.run_dir!);
      expect(manifest.files.map((f) => f.path)).toEqual([
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
      ]);
      expect((await readPlan(e.run_dir!)).plan.inspection.model_tree_sha256).toBe(manifest.tree_sha256);
      trees.add(manifest.tree_sha256);
    }
    expect(trees.size).toBe(1);
    const [tree] = [...trees];

    // The checkpoint changes under engine-3's node, and engine-3 dies: it is re-inspected there.
    const tokenizer = path.join(modelDir, "tokenizer.json");
    const original = await fs.readFile(tokenizer);
    await fs.writeFile(tokenizer, Buffer.concat([original, Buffer.from("\n")]));
    const pids = await engineProcesses(fleet.stateDir);
    const third = pids.find((p) => p.engine === "engine-3")!;
    process.kill(third.pid, "SIGKILL");
    await waitFor("engine-3 gone", async () =>
      (await engineProcesses(fleet.stateDir)).every((p) => p.pid !== third.pid) ? true : undefined,
    );

    const refused = await once({ NARWHAL_ONCE_OUTWAIT_MS: "2000" });
    expect(refused.code, refused.stderr.slice(-2000)).toBe(2);
    const after = await status(fleet.stateDir);
    const e3 = after.engines.find((e) => e.engine === "engine-3")!;
    expect(e3).toMatchObject({ phase: "failed", last_error: { step: "inspect", failure: "outwait" } });
    expect(e3.last_error!.message).toMatch(
      new RegExp(
        `checkpoint ${modelDir} has tree digest [0-9a-f]{64} on node local-2 \\(engine-3\\), but ${tree} on node local \\(engine-1\\)`,
      ),
    );
    // The engines already running the checkpoint were not touched.
    for (const name of ["engine-1", "engine-2"]) {
      expect(after.engines.find((e) => e.engine === name)?.phase).toBe("captured");
      expect((await engineProcesses(fleet.stateDir)).find((p) => p.engine === name)?.pid).toBe(
        pids.find((p) => p.engine === name)?.pid,
      );
    }

    await fs.writeFile(tokenizer, original);
    const back = await once();
    expect(back.code, back.stderr.slice(-2000)).toBe(0);
    const restored = (await status(fleet.stateDir)).engines.find((e) => e.engine === "engine-3")!;
    expect(restored.phase).toBe("captured");
    expect((await readManifest(restored.run_dir!)).tree_sha256).toBe(tree);
  });
});
