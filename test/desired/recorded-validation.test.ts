// A reconcile's validation of desired/ as the controller last recorded it valid (state/desired-summary.json):
// the same texts, launcher and node files are not judged by the rules again and keep their input hashes; any
// change of those is validated whole, as without a record.
import fs from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { validateDesired } from "../../src/desired/load.js";
import { DESIRED_SUMMARY_FILE, recordedValidation } from "../../src/state/desired-summary.js";
import { recordedTree, RECORD_BREAKING_CHANGES } from "../state/recorded-summary.js";
import { readDesiredKey } from "../../src/desired/desired-key.js";
import { runningLauncher } from "../../src/app.js";
import { rec, validTree, writeTree, type Obj } from "./fixtures.js";

const withRecord = async (dir: string, stateDir: string) =>
  validateDesired(dir, { recorded: await recordedValidation(stateDir) });
const hashesOf = (r: Awaited<ReturnType<typeof validateDesired>>) =>
  Object.fromEntries((r.state?.specs ?? []).map((s) => [s.name, s.input_hash]));

describe("validation with the controller's record of its last valid desired state", () => {
  it("takes the recorded input hashes while desired/ reads as it was validated; the rest is built as ever", async () => {
    const { dir, stateDir } = await recordedTree();
    const fresh = await validateDesired(dir);
    const again = await withRecord(dir, stateDir);
    expect(again.issues).toEqual([]);
    expect(hashesOf(again)).toEqual({ ...hashesOf(fresh), "engine-1": "recorded" });
    const strip = (r: typeof fresh) => r.state?.specs.map(({ input_hash: _h, ...s }) => s);
    expect(strip(again)).toEqual(strip(fresh));
    expect(again.state?.source).toEqual(fresh.state?.source); // the same key is recorded again
  });

  it.each(RECORD_BREAKING_CHANGES)("validates whole, rules and hashes, when %s", async (_what, change) => {
    const { dir, stateDir } = await recordedTree();
    await change(dir);
    const again = await withRecord(dir, stateDir);
    expect(hashesOf(again)["engine-1"] ?? "invalid").not.toBe("recorded");
    expect(again).toEqual(await validateDesired(dir));
  });

  it("a rule broken by an edit is reported though the record is of the tree before it", async () => {
    const { dir, stateDir } = await recordedTree();
    const launchFile = path.join(dir, "engine-launch.json");
    const launch = JSON.parse(await fs.readFile(launchFile, "utf8")) as { engines: Record<string, Obj> };
    (launch.engines["engine-2"]!.runtime as Obj).extra_args = ["--port", "9999"]; // a flag the launcher manages
    await fs.writeFile(launchFile, JSON.stringify(launch));
    const again = await withRecord(dir, stateDir);
    expect(again.state).toBeUndefined();
    expect(again.issues).toEqual((await validateDesired(dir)).issues);
    expect(again.issues.length).toBeGreaterThan(0);
  });

  it("stands for the rules' verdict on the texts it names: the rules do not run again for them", async () => {
    // A record forged for a tree that breaks a rule is believed: the rules run again on a change of what they
    // read, never as a second look at what the controller recorded valid (only the lock holder writes state/,
    // 0700). This is what shows the rules were skipped, not merely agreed with.
    const tree = validTree();
    rec(tree, 2).runtime = { ...(rec(tree, 2).runtime as Obj), extra_args: ["--port", "9999"] };
    const broken = await writeTree(tree);
    expect((await validateDesired(broken)).issues.length).toBeGreaterThan(0);
    const key = await readDesiredKey(broken, runningLauncher().digest);
    const forged = { key: key!, node_files: [], input_hashes: new Map<string, string>() };
    expect((await validateDesired(broken, { recorded: forged })).issues).toEqual([]);
  });

  it("is not taken with overridden variables or launch records (no key stands for those), nor when malformed", async () => {
    const { dir, stateDir } = await recordedTree();
    const edited = await validateDesired(dir, { recorded: await recordedValidation(stateDir), editLaunch: (d) => d });
    expect(hashesOf(edited)["engine-1"]).not.toBe("recorded");
    const vars = await validateDesired(dir, {
      recorded: await recordedValidation(stateDir),
      variables: { NARWHAL_X: "1" },
    });
    expect(hashesOf(vars)["engine-1"]).not.toBe("recorded");
    await fs.writeFile(path.join(stateDir, DESIRED_SUMMARY_FILE), '{"key": 1}');
    expect(await recordedValidation(stateDir)).toBeNull();
    expect(await withRecord(dir, stateDir)).toEqual(await validateDesired(dir));
  });

  it("an engine the record does not name gets its hash computed", async () => {
    const { dir, stateDir } = await recordedTree();
    const file = path.join(stateDir, DESIRED_SUMMARY_FILE);
    const summary = JSON.parse(await fs.readFile(file, "utf8")) as { engines: Record<string, unknown> };
    delete summary.engines["engine-2"];
    await fs.writeFile(file, JSON.stringify(summary));
    const again = await withRecord(dir, stateDir);
    expect(hashesOf(again)["engine-2"]).toBe(hashesOf(await validateDesired(dir))["engine-2"]);
    expect(hashesOf(again)["engine-1"]).toBe("recorded");
  });
});
