// A test run SIGKILLed while it holds a rig: a throwaway vitest run whose only
// test runs `body` (with createRig imported), writes what it holds with
// `say(value)`, and never ends; killed with its whole process group (its worker
// and whatever that spawned without detaching), so no exit handler runs. What
// the next createRig must sweep is then left behind, as after a killed CI job.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { ownerDead } from "./net.js";

/** Run `body` in a vitest run of its own, SIGKILL the run once it said what it holds, and return that. */
export async function heldByKilledRun<T extends { netns: string }>(body: string[]): Promise<T> {
  const work = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-rig-killed-"));
  const said = path.join(work, "held.json");
  const rigModule = path.join(import.meta.dirname, "rig.ts");
  await fs.writeFile(path.join(work, "vitest.config.mjs"), "export default { test: { include: ['hold.test.ts'] } };\n");
  await fs.writeFile(
    path.join(work, "hold.test.ts"),
    [
      'import { writeFileSync } from "node:fs";',
      'import { test } from "vitest";',
      `import { createRig } from ${JSON.stringify(rigModule)};`,
      `const say = (value) => writeFileSync(${JSON.stringify(said)}, JSON.stringify(value));`,
      'test("hold", async () => {',
      ...body.map((l) => `  ${l}`),
      "  await new Promise(() => {});",
      "}, 600_000);",
      "",
    ].join("\n"),
  );
  const vitest = path.join(import.meta.dirname, "../../node_modules/vitest/vitest.mjs");
  const child = spawn(process.execPath, [vitest, "run", "--root", work, "--config", "vitest.config.mjs"], {
    detached: true, // its own process group: the run and its worker die together
    stdio: "ignore",
  });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  try {
    await expect.poll(() => existsSync(said), { timeout: 120_000, interval: 50 }).toBe(true);
    const held = JSON.parse(await fs.readFile(said, "utf8")) as T;
    process.kill(-child.pid!, "SIGKILL");
    await exited;
    // the worker that created the rig (its pid is in the namespace's name) is killed with its group
    await expect.poll(() => ownerDead(Number(held.netns.split("-")[1])), { timeout: 10_000 }).toBe(true);
    return held;
  } finally {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGKILL");
    await fs.rm(work, { recursive: true, force: true });
  }
}
