// A node record as the desired state gives it, for tests of how nodes are reached.
import type { NodeSpec } from "../../src/desired/types.js";

/** `{ node }` (what NodeHosts.learn takes) for a node named `name`; with `ssh`, reached over ssh. */
export function nodeRecord(name: string, ssh?: NodeSpec["ssh"]): { node: NodeSpec } {
  return {
    node: {
      name,
      sysfs_root: "/sys",
      nvidia_smi: "nvidia-smi",
      rocminfo: "rocminfo",
      dev_root: "/",
      work_dir: "/srv/narwhal/runs",
      ...(ssh ? { ssh } : {}),
    },
  };
}
