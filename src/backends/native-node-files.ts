// What a native engine needs on its own node: for a node reached over ssh, the
// run's plan, its environment file (and key file, if any) and the check script
// with its input are copied into the run's directory under the node's work_dir,
// immutable like the controller's run directory (the same bytes again is fine,
// other bytes are refused). A local node uses the controller's run directory itself.
import fs from "node:fs/promises";
import path from "node:path";
import { createHash } from "node:crypto";
import { PhaseError, type Step } from "../errors.js";
import type { NodeHosts } from "../hosts/node-hosts.js";
import type { HostAccess } from "../hosts/types.js";
import type { NodeFile } from "../hosts/ensure-files.js";
import { API_KEY_FILE, LAUNCH_FILE } from "../phases/prepare.js";
import { ENV_FILES } from "../phases/run-env.js";
import type { PreparedRun } from "../phases/types.js";
import { ENGINE_LAUNCH_FILE, ENGINE_RUNTIME_FILE } from "../phases/seed-records.js";

/** Run-directory files an engine reads on its node, with their modes there. Absent ones are skipped. */
const RUN_FILES: ReadonlyArray<{ name: string; mode: number }> = [
  { name: LAUNCH_FILE, mode: 0o400 },
  // engine.env, or container.env of a run prepared before engine.env: whichever the run holds.
  ...ENV_FILES.map((name) => ({ name, mode: 0o600 })),
  { name: API_KEY_FILE, mode: 0o400 },
  // Seed 003 §16: "Preparation transfers both the launch record and a launcher snapshot to the engine host".
  { name: ENGINE_LAUNCH_FILE, mode: 0o600 },
  { name: ENGINE_RUNTIME_FILE, mode: 0o600 },
];

/** Where a run lives for its engine: the node's access and the run directory on that node. */
export interface RunOnNode {
  host: HostAccess;
  /** The run directory on the node: the controller's own for a local node. */
  dir: string;
  /** The node is not the controller's machine: files must be copied there. */
  remote: boolean;
}

export function runOnNode(hosts: NodeHosts, node: string, run: PreparedRun): RunOnNode {
  const host = hosts.access(node);
  return { host, dir: hosts.runDirOnNode(node, run.dir), remote: host.kind !== "local" };
}

/** Name on the node of a file the controller passes: its own name inside the run directory, else content-addressed. */
function nodeName(run: PreparedRun, source: string, data: Buffer): string {
  const base = path.basename(source);
  if (path.dirname(path.resolve(source)) === path.resolve(run.dir)) return base;
  // A temporary input (an inspection's) may differ per call under one name: its digest keeps each immutable.
  const ext = path.extname(base);
  const digest = createHash("sha256").update(data).digest("hex").slice(0, 12);
  return `${base.slice(0, base.length - ext.length)}.${digest}${ext}`;
}

/**
 * Make the run's files present on its node, plus `extra` controller files (the check script, its input);
 * returns the paths of the extra files on the node. A local node reads them where they are.
 */
export async function stageRun(
  where: RunOnNode,
  run: PreparedRun,
  step: Step,
  extra: string[] = [],
): Promise<string[]> {
  if (!where.remote) return extra;
  const files: NodeFile[] = [];
  for (const { name, mode } of RUN_FILES) {
    const data = await fs.readFile(path.join(run.dir, name)).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    });
    if (data) files.push({ path: path.posix.join(where.dir, name), data, mode });
  }
  const placed: string[] = [];
  for (const source of extra) {
    const data = await fs.readFile(source);
    const file = path.posix.join(where.dir, nodeName(run, source, data));
    files.push({ path: file, data, mode: 0o600 });
    placed.push(file);
  }
  // All of them in one call (one command over ssh): written where absent, the same bytes again is fine.
  const outcomes = await where.host.ensureFiles(files);
  const other = files.find((_, i) => outcomes[i] === "other");
  if (other) {
    throw new PhaseError(
      run.engine,
      step,
      `${other.path} on node ${where.host.node} holds other bytes than ${run.dir}`,
      {
        retryable: false,
        input: `${other.path} (node ${where.host.node})`,
        fix: `A run directory is immutable: if nothing of this run runs on node ${where.host.node}, remove ${where.dir} there and narwhal copies the run again; otherwise stop it first.`,
      },
    );
  }
  return placed;
}
