// A desired tree whose last valid validation the controller recorded (state/desired-summary.json), for the
// readers that take that record instead of judging desired/ again: `narwhal status` and a reconcile's
// validation. Shared with the changes of desired/ after which the record no longer stands for it.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { loadDesired } from "../../src/desired/load.js";
import { DESIRED_SUMMARY_FILE, writeDesiredSummary } from "../../src/state/desired-summary.js";
import { validTree, writeTree } from "../desired/fixtures.js";

/**
 * A valid tree whose node names an ssh key and known_hosts (0600, in the tree), its summary recorded in a fresh
 * state directory with engine-1's input hash set to "recorded": a value no validation computes, seen only when
 * the record is taken.
 */
export async function recordedTree(): Promise<{ dir: string; stateDir: string }> {
  const tree = validTree();
  (tree.fleet as { nodes: Array<Record<string, unknown>> }).nodes[0]!.ssh = {
    destination: "root@gpu-a",
    identity_file: "id_test",
    known_hosts_file: "known_hosts",
  };
  const dir = await writeTree(tree);
  for (const f of ["id_test", "known_hosts"]) await fs.writeFile(path.join(dir, f), "k\n", { mode: 0o600 });
  const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-recorded-"));
  expect(await writeDesiredSummary(stateDir, await loadDesired(dir))).toBe(true);
  const file = path.join(stateDir, DESIRED_SUMMARY_FILE);
  const summary = JSON.parse(await fs.readFile(file, "utf8")) as { engines: Record<string, { input_hash: string }> };
  summary.engines["engine-1"]!.input_hash = "recorded";
  await fs.writeFile(file, JSON.stringify(summary));
  return { dir, stateDir };
}

/** Changes of what a validation reads after which the record does not stand for desired/. */
export const RECORD_BREAKING_CHANGES: Array<[string, (dir: string) => Promise<void>]> = [
  ["a byte of fleet.json changed", (dir) => fs.appendFile(path.join(dir, "fleet.json"), "\n")],
  ["a variable changed", (dir) => fs.appendFile(path.join(dir, "deployment.env"), "\nNARWHAL_X=1\n")],
  ["the ssh key's mode changed", (dir) => fs.chmod(path.join(dir, "id_test"), 0o644)],
  ["known_hosts went away", (dir) => fs.rm(path.join(dir, "known_hosts"))],
];
