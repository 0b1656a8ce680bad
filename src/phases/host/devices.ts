// Declared device exposure (seed 000, "Check every declared device path":
// accelerator_devices + transfer.devices must exist before launch).

import path from "node:path";
import type { HostAccess } from "../../hosts/types.js";
import { fileErrno } from "./host-read.js";

export interface DeclaredDevice {
  /** The path as declared, e.g. "/dev/nvidia0". */
  path: string;
  /** The launch-record field that declared it, e.g. "launch.accelerator_devices[0]". */
  input: string;
}

export interface DeviceCheck {
  path: string;
  /** Where it was looked for: node.dev_root joined with the declared path. */
  checked: string;
  input: string;
  present: boolean;
}

export function declaredDevices(accelerator: string[], transfer: string[]): DeclaredDevice[] {
  return [
    ...accelerator.map((p, i) => ({ path: p, input: `launch.accelerator_devices[${i}]` })),
    ...transfer.map((p, i) => ({ path: p, input: `launch.transfer.devices[${i}]` })),
  ];
}

/**
 * Check each declared path under devRoot on the engine's node. devRoot is a
 * filesystem root ("/" on a real host), so "/dev/nvidia0" is looked for at
 * <devRoot>/dev/nvidia0. stat follows symlinks, like Python's Path.exists in the
 * seed; a path stat cannot see (permissions) counts as missing, as it does there.
 * One stat at a time: each is a round trip on a remote node, and a node limits
 * its concurrent sessions. A node that cannot be reached is not a missing device: it is thrown.
 */
export async function checkDevices(
  host: HostAccess,
  devRoot: string,
  devices: DeclaredDevice[],
): Promise<DeviceCheck[]> {
  const checks: DeviceCheck[] = [];
  for (const d of devices) {
    const checked = path.posix.join(devRoot, d.path);
    const present = await host.stat(checked).then(
      (st) => st !== null,
      (err: unknown) => {
        fileErrno(err);
        return false;
      },
    );
    checks.push({ path: d.path, checked, input: d.input, present });
  }
  return checks;
}
