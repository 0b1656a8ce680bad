// seed 000 checks `sha256sum $NARWHAL_ENGINE_LAUNCHER` against $NARWHAL_ENGINE_LAUNCHER_SHA256 before
// prepare: with the pin set, prepare refuses a launcher whose digest differs — terminally, naming the
// variable, both digests and the fix — and creates nothing; the reviewed digest prepares as before.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepare } from "../../src/phases/prepare.js";
import { APP, engineSpec, inspection, LAUNCHER } from "./plan-fixtures.js";

let state: string;
beforeAll(async () => {
  state = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-launcher-pin-"));
});
afterAll(async () => {
  await fs.rm(state, { recursive: true, force: true });
});

describe("prepare: the operator's launcher pin (NARWHAL_ENGINE_LAUNCHER_SHA256)", () => {
  it("refuses a launcher whose digest differs from the pin, terminally, before creating anything", async () => {
    const pin = "0".repeat(64);
    const out = path.join(state, "never");
    const refused = prepare(engineSpec({ launcher_pin: pin }), inspection(), { stateDir: state, app: APP, out });
    await expect(refused).rejects.toMatchObject({
      name: "PhaseError",
      engine: "engine-1",
      step: "prepare",
      retryable: false,
      input: "NARWHAL_ENGINE_LAUNCHER_SHA256",
      message: `this narwhal's launcher digest is ${LAUNCHER.digest} (narwhal ${LAUNCHER.version}), but NARWHAL_ENGINE_LAUNCHER_SHA256 pins ${pin}`,
      fix: `Set NARWHAL_ENGINE_LAUNCHER_SHA256=${LAUNCHER.digest} after reviewing the upgrade, or unset it.`,
    });
    await expect(fs.access(out)).rejects.toMatchObject({ code: "ENOENT" });
    // Not even a runs/ directory under the state dir: nothing was prepared.
    expect(await fs.readdir(state)).toEqual([]);
  });

  it("prepares as before when the pin is this launcher's digest", async () => {
    const run = await prepare(engineSpec({ launcher_pin: LAUNCHER.digest }), inspection(), {
      stateDir: state,
      app: APP,
    });
    const plan = JSON.parse(await fs.readFile(path.join(run.dir, "launch.json"), "utf8"));
    expect(plan.launcher.digest).toBe(LAUNCHER.digest);
  });
});
