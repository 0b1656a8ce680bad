// Seed 000: `test "$(docker image inspect "$NARWHAL_ENGINE_IMAGE" --format '{{.Id}}')" = "$NARWHAL_ENGINE_IMAGE"`.
// A tag is refused by validate, which names what it resolves to on each node and the line to paste;
// an image the node does not hold by that identity stops the engine before anything runs; and the
// simulator image the example pins is what a fresh build gives (the build is reproducible).
import fs from "node:fs/promises";
import path from "node:path";
import { describe, expect, inject, it } from "vitest";
import { simFleet, type SimFleet } from "../e2e/sim-fleet.js";
import { runCli, status } from "../e2e/cli.js";
import { simImageId } from "../docker/sim-image.mjs";
import { parseEnvFile } from "../../src/desired/env-file.js";

const env = { DOCKER_HOST: inject("dockerHost") };

/** The fleet's engine images through ${NARWHAL_ENGINE_IMAGE}, set to `image`. */
async function imageVariable(fleet: SimFleet, image: string): Promise<void> {
  const file = path.join(fleet.dir, "engine-launch.json");
  const launch = JSON.parse(await fs.readFile(file, "utf8")) as { engines: Record<string, { image?: string }> };
  for (const r of Object.values(launch.engines)) r.image = "${NARWHAL_ENGINE_IMAGE}";
  await fs.writeFile(file, JSON.stringify(launch, null, 2));
  await fs.appendFile(path.join(fleet.dir, "deployment.env"), `NARWHAL_ENGINE_IMAGE=${image}\n`);
}

describe("images by identity", () => {
  it("examples/container-sim pins the id a fresh build of the simulator image gives", async () => {
    const text = await fs.readFile(path.resolve("examples/container-sim/deployment.env"), "utf8");
    const pinned = parseEnvFile(text, "deployment.env").variables["NARWHAL_ENGINE_IMAGE"];
    const fresh = await simImageId();
    expect(await simImageId(), "two builds give one id").toBe(fresh);
    expect(inject("simImageId"), "the daemon's docker load gives the id the tarball names").toBe(fresh);
    expect(pinned, `paste into examples/container-sim/deployment.env: NARWHAL_ENGINE_IMAGE=${fresh}`).toBe(fresh);
    const v = await runCli(["validate", "--desired", "examples/container-sim"], env);
    expect(v.code, v.stderr).toBe(0);
  });

  it("validate refuses a tag, naming the id it is on each node and the line to paste (exit 1)", async () => {
    const fleet = await simFleet({ engines: [{}], container: { image: inject("simImage") } });
    await imageVariable(fleet, inject("simImageTag"));
    const id = inject("simImageId");
    for (const cmd of [
      ["validate"],
      ["plan", "--state", fleet.stateDir],
      ["reconcile", "--once", "--state", fleet.stateDir],
    ]) {
      const r = await runCli([...cmd, "--desired", fleet.dir], env);
      expect(r.code, `${cmd[0]}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(
        `engine-launch.json $.engines["engine-1"].image: engine-1: image "${inject("simImageTag")}" is a tag`,
      );
      expect(r.stderr).toContain(
        `on node local (${inject("dockerHost")}) ${inject("simImageTag")} is ${id}; paste into deployment.env: NARWHAL_ENGINE_IMAGE=${id} [image-identity]`,
      );
    }
    // Nothing was acted on: reconcile refused before the lock.
    await expect(fs.stat(path.join(fleet.stateDir, "runs"))).rejects.toThrow();
  });

  it("validate says which node could not be asked, and fails as invalid all the same", async () => {
    const fleet = await simFleet({ engines: [{}], container: { image: inject("simImageTag") } });
    const file = path.join(fleet.dir, "fleet.json");
    const doc = JSON.parse(await fs.readFile(file, "utf8")) as { nodes: Array<Record<string, unknown>> };
    doc.nodes[0]!["docker_host"] = "tcp://127.0.0.1:9"; // discard port: nothing listens
    await fs.writeFile(file, JSON.stringify(doc, null, 2));
    const r = await runCli(["validate", "--desired", fleet.dir, "--format", "json"], env);
    expect(r.code).toBe(1);
    const issue = (JSON.parse(r.stdout) as { issues: Array<{ rule: string; message: string }> }).issues.find(
      (i) => i.rule === "image-identity",
    );
    expect(issue?.message).toMatch(/node local \(tcp:\/\/127\.0\.0\.1:9\) could not be asked \(.+\)/);
    // Not known: it says how to find the id.
    expect(issue?.message).toContain(
      `then paste the id docker image inspect ${inject("simImageTag")} --format '{{.Id}}' prints there`,
    );
  });

  it("a digest the node does not hold stops the engine before anything runs, naming node, NARWHAL_ENGINE_IMAGE and the fix", async () => {
    const fleet = await simFleet({ engines: [{}], container: { image: inject("simImage") } });
    const digest = `narwhal-sim@sha256:${"0".repeat(64)}`;
    await imageVariable(fleet, digest);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      ...env,
      // Missing is outwaited (the operator loads it, narwhal goes on); --once gives up after this long.
      NARWHAL_ONCE_OUTWAIT_MS: "1500",
    });
    expect(r.code, r.stderr.slice(-2000)).toBe(2);
    const [engine] = (await status(fleet.stateDir)).engines;
    expect(engine!.last_error).toMatchObject({
      engine: "engine-1",
      step: "inspect",
      input: "NARWHAL_ENGINE_IMAGE (engine-launch.json image)",
    });
    expect(engine!.last_error!.message).toContain(`engine-1: image ${digest} is not present on node local`);
    expect(engine!.last_error!.fix).toContain("on node local");
    await runCli(["down", "--state", fleet.stateDir], env);
  });
});
