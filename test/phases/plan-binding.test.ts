// The plan binding every step after check verifies: launch.json must hash to
// checked.json's plan_sha256 and to the state's record. Real run directories
// on disk, edited the way an operator (or an attacker) would.
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readVerifiedPlan } from "../../src/phases/plan-binding.js";
import { sha256 } from "../../src/phases/prepare.js";
import { PhaseError } from "../../src/errors.js";
import type { PreparedRun } from "../../src/phases/types.js";

let dir: string;
const PLAN =
  JSON.stringify(
    {
      schema: "narwhal.launch/v1",
      engine: "engine-1",
      command: ["python3", "-m", "vllm.entrypoints.openai.api_server"],
    },
    null,
    2,
  ) + "\n";
const run = (planSha = sha256(PLAN)): PreparedRun => ({
  engine: "engine-1",
  dir,
  input_hash: "i".repeat(64),
  plan_sha256: planSha,
  launch_token: "t",
});

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "narwhal-binding-"));
  await writeFile(path.join(dir, "launch.json"), PLAN, { mode: 0o400 });
  await writeFile(path.join(dir, "checked.json"), JSON.stringify({ plan_sha256: sha256(PLAN) }));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const refusal = async (p: Promise<unknown>): Promise<PhaseError> => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PhaseError);
  return err as PhaseError;
};

describe("readVerifiedPlan", () => {
  it("returns the plan when launch.json, checked.json and the state agree", async () => {
    const v = await readVerifiedPlan(run(), "start");
    expect(v.planSha).toBe(sha256(PLAN));
    expect(v.plan.engine).toBe("engine-1");
  });

  it("refuses an edited launch.json terminally, naming the file and both hashes", async () => {
    const edited = PLAN.replace('"python3"', '"/bin/sh", "-c", "touch /tmp/x; exec \\"$@\\"", "sh", "python3"');
    await chmod(path.join(dir, "launch.json"), 0o600);
    await writeFile(path.join(dir, "launch.json"), edited);
    const err = await refusal(readVerifiedPlan(run(), "start"));
    expect(err).toMatchObject({
      engine: "engine-1",
      step: "start",
      retryable: false,
      input: path.join(dir, "launch.json"),
    });
    expect(err.message).toContain(sha256(edited));
    expect(err.message).toContain(sha256(PLAN));
    expect(err.message).toContain(path.join(dir, "checked.json"));
    expect(err.fix).toMatch(/fresh prepared run/);
  });

  it("refuses a plan re-checked behind the state's back (checked.json rewritten to the edited hash)", async () => {
    const edited = PLAN.replace("vllm", "evil");
    await chmod(path.join(dir, "launch.json"), 0o600);
    await writeFile(path.join(dir, "launch.json"), edited);
    await writeFile(path.join(dir, "checked.json"), JSON.stringify({ plan_sha256: sha256(edited) }));
    const err = await refusal(readVerifiedPlan(run(), "probe"));
    expect(err).toMatchObject({ step: "probe", retryable: false });
    expect(err.message).toContain(`the state file's record of the prepared run binds ${sha256(PLAN)}`);
    expect(err.message).not.toContain(`checked.json binds`);
  });

  it("names the hash even when the edit broke the JSON", async () => {
    await chmod(path.join(dir, "launch.json"), 0o600);
    await writeFile(path.join(dir, "launch.json"), "{ not json");
    const err = await refusal(readVerifiedPlan(run(), "capture"));
    expect(err.message).toContain(sha256("{ not json"));
  });

  it("refuses a run that was never checked", async () => {
    await rm(path.join(dir, "checked.json"));
    const err = await refusal(readVerifiedPlan(run(), "start"));
    expect(err).toMatchObject({ retryable: false, input: "checked.json" });
  });
});
