// The shape of a corpus case and the helpers cases are written with
// (corpus.ts, corpus-several.ts).
import type { DesiredTree, Obj } from "../desired/fixtures.js";
import { FILE_NAMES, type RawFiles } from "./tree.js";

export interface Expect {
  file: string;
  /** JSON path such as `$.engines["engine-1"].gpu_ids[0]`, `$.VAR` or `line 3` for deployment.env. */
  path: string;
  message: RegExp;
}

export interface CorpusCase {
  name: string;
  category: string;
  /** Break the (cloned) tree. */
  edit?: (t: DesiredTree) => void;
  /** File texts or bytes that replace what the tree would write. */
  raw?: (t: DesiredTree) => RawFiles;
  /** Filesystem changes after the files are written (symlinks, directories, pipes). */
  after?: (dir: string, t: DesiredTree) => Promise<void>;
  /**
   * The issue that must come back (others may come with it). A list must be
   * exactly the issues reported, each once, and nothing else: a tree with
   * several mistakes reports each, and a consequence of one is not another.
   */
  expect: Expect | Expect[] | ((t: DesiredTree) => Expect | Expect[]);
}

export const L = FILE_NAMES.launch;
export const F = FILE_NAMES.fleet;
export const E = FILE_NAMES.env;
export const r1 = (...rest: string[]) => `$.engines["engine-1"]${rest.join("")}`;
export const r2 = (...rest: string[]) => `$.engines["engine-2"]${rest.join("")}`;
export const node0 = (t: DesiredTree) => (t.fleet["nodes"] as Obj[])[0] as Obj;
/** Port the first engine's HTTP/attestation/NIXL listener uses, whichever variable sets it. */
export const port1 = (t: DesiredTree, suffix: string, global?: string) =>
  t.env[`NARWHAL_NODE_1_${suffix}`] ?? (global ? t.env[global] : undefined) ?? "5600";

/** Every issue a case names (one, or each mistake of a several-mistakes tree). */
export const expectationsOf = (c: CorpusCase, tree: DesiredTree): Expect[] => {
  const e = typeof c.expect === "function" ? c.expect(tree) : c.expect;
  return Array.isArray(e) ? e : [e];
};
/** True when the case names every issue the tree must report (no others allowed). */
export const expectsExactly = (c: CorpusCase, tree: DesiredTree): boolean =>
  Array.isArray(typeof c.expect === "function" ? c.expect(tree) : c.expect);
/** The (first) issue a case names. */
export const expectationOf = (c: CorpusCase, tree: DesiredTree): Expect => expectationsOf(c, tree)[0] as Expect;
