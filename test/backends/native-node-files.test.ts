// A run's files on its engine's node (native-node-files.ts stageRun): placed once in one call, the same bytes
// again are fine, other bytes are refused naming the file and the node. The node here is a directory of this
// machine reached through a LocalHost: the files are real, only the node is near.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stageRun, type RunOnNode } from "../../src/backends/native-node-files.js";
import { PhaseError } from "../../src/errors.js";
import { LocalHost } from "../../src/hosts/local.js";
import type { PreparedRun } from "../../src/phases/types.js";

let root: string;
let run: PreparedRun;
let where: RunOnNode;
beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "nw-node-files-"));
  const dir = path.join(root, "state", "runs", "engine-1", "r1");
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(path.join(dir, "launch.json"), '{"engine":"engine-1"}\n');
  await fs.writeFile(path.join(dir, "engine.env"), "NARWHAL_ENGINE=engine-1\n");
  await fs.writeFile(path.join(root, "check.py"), "print('check')\n");
  run = { engine: "engine-1", dir, input_hash: "h", plan_sha256: "p", launch_token: "t" };
  where = { host: new LocalHost("gpu-a", {}), dir: path.join(root, "node", "runs", "engine-1", "r1"), remote: true };
});
afterAll(() => fs.rm(root, { recursive: true, force: true }));

describe("stageRun", () => {
  it("places the run's files and the extra ones, with their modes; the same bytes again are fine", async () => {
    const [check] = await stageRun(where, run, "check", [path.join(root, "check.py")]);
    expect(check).toMatch(new RegExp(`^${where.dir}/check\\.[0-9a-f]{12}\\.py$`));
    expect(await fs.readFile(path.join(where.dir, "launch.json"), "utf8")).toBe('{"engine":"engine-1"}\n');
    expect((await fs.stat(path.join(where.dir, "launch.json"))).mode & 0o777).toBe(0o400);
    expect((await fs.stat(path.join(where.dir, "engine.env"))).mode & 0o777).toBe(0o600);
    expect(await fs.readFile(check!, "utf8")).toBe("print('check')\n");
    expect(await stageRun(where, run, "start")).toEqual([]);
  });

  it("refuses a run file the node holds with other bytes, naming it and the node", async () => {
    const env = path.join(where.dir, "engine.env");
    await fs.writeFile(env, "NARWHAL_ENGINE=someone-else\n");
    const err: unknown = await stageRun(where, run, "start").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PhaseError);
    expect(err).toMatchObject({
      message: expect.stringContaining(`${env} on node gpu-a holds other bytes than ${run.dir}`),
      retryable: false,
      input: `${env} (node gpu-a)`,
    });
    expect(await fs.readFile(env, "utf8")).toBe("NARWHAL_ENGINE=someone-else\n");
  });
});
