// Trees whose nodes are reached over ssh, written with the key files beside
// them: the node tests start from the valid two-engine tree and move its
// engines to ssh hosts.
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { validateDesired } from "../../src/desired/load.js";
import type { ValidationIssue } from "../../src/errors.js";
import { validTree, writeTree, type DesiredTree, type Obj } from "./fixtures.js";

export const nodes = (t: DesiredTree) => t.fleet["nodes"] as Obj[];

/** Engine n2 on a second node, gpu-b, with its own address (so only the per-host rules can join the two). */
export function twoNodeTree(): DesiredTree {
  const t = validTree();
  nodes(t)[0]!["engines"] = ["n1"];
  nodes(t).push({ name: "gpu-b", engines: ["n2"] });
  t.env["NARWHAL_NODE_2_IP"] = "10.0.0.12";
  return t;
}

/** Write `tree`, then `files` (path relative to the desired dir → mode), and validate. */
export async function issuesWithFiles(
  tree: DesiredTree,
  files: Record<string, number> = {},
): Promise<{ dir: string; issues: ValidationIssue[] }> {
  const dir = await writeTree(tree);
  for (const [rel, mode] of Object.entries(files)) {
    await mkdir(join(dir, rel, ".."), { recursive: true });
    await writeFile(join(dir, rel), "key material\n");
    await chmod(join(dir, rel), mode);
  }
  return { dir, issues: (await validateDesired(dir)).issues };
}
