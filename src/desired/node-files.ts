// The files a node's ssh block names (identity_file, known_hosts_file), looked
// at once while validating, so the rules that judge them stay pure: an ssh key
// that is missing or that OpenSSH would refuse is an error at `validate`, not
// a connection failure at the first step that reaches the node.

import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import type { FleetForRules } from "./records-for-rules.js";
import { resolveDesiredPath } from "./spec.js";

export interface NodeFileFacts {
  /** Absolute path the value resolves to (relative = desired directory). */
  path: string;
  kind: "file" | "missing" | "not-file" | "unreadable";
  /** Permission bits of a file. */
  mode?: number;
  /** The file's owner is the user the controller (and its ssh client) runs as. */
  ownedByController?: boolean;
  /** errno code when the file could not be looked at. */
  code?: string;
}

/** Facts per path value as written in fleet.json (after substitution). */
export type NodeFiles = ReadonlyMap<string, NodeFileFacts>;

const sameFacts = (a: NodeFileFacts | undefined, b: NodeFileFacts): boolean =>
  !!a &&
  a.path === b.path &&
  a.kind === b.kind &&
  a.mode === b.mode &&
  a.ownedByController === b.ownedByController &&
  a.code === b.code;

/** Whether each value a validation recorded (with what it found there) is found alike `now`. */
export function sameNodeFiles(recorded: ReadonlyArray<readonly [string, NodeFileFacts]>, now: NodeFiles): boolean {
  return recorded.every(([v, facts]) => sameFacts(now.get(v), facts));
}

/** Look at every identity_file and known_hosts_file the nodes name. */
export async function inspectNodeFiles(dir: string, nodes: FleetForRules["nodes"]): Promise<NodeFiles> {
  return inspectNodeFileValues(
    dir,
    nodes.flatMap((n) => [n?.ssh?.identity_file, n?.ssh?.known_hosts_file]).filter((v) => v !== undefined),
  );
}

/** Look at the files these values (as written in fleet.json, after substitution) name. */
export async function inspectNodeFileValues(dir: string, values: Iterable<string>): Promise<NodeFiles> {
  const uid = process.getuid?.();
  const facts = await Promise.all(
    [...new Set(values)].map(async (v) => [v, await factsOf(resolveDesiredPath(dir, v), uid)] as const),
  );
  return new Map(facts);
}

async function factsOf(path: string, uid: number | undefined): Promise<NodeFileFacts> {
  try {
    const st = await stat(path);
    if (!st.isFile()) return { path, kind: "not-file" };
    const mode = st.mode & 0o7777;
    const ownedByController = uid === undefined || st.uid === uid;
    try {
      await access(path, constants.R_OK);
    } catch (e) {
      return { path, kind: "unreadable", mode, ownedByController, code: (e as NodeJS.ErrnoException).code ?? "EACCES" };
    }
    return { path, kind: "file", mode, ownedByController };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? "EIO";
    return code === "ENOENT" || code === "ENOTDIR"
      ? { path, kind: "missing", code }
      : { path, kind: "unreadable", code };
  }
}
