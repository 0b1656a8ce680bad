// Declared device exposure (seed 000, "Check every declared device path":
// accelerator_devices + transfer.devices must exist before launch).

import { access } from "node:fs/promises";
import path from "node:path";

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
 * Check each declared path under devRoot. devRoot is a filesystem root ("/" on
 * a real host), so "/dev/nvidia0" is looked for at <devRoot>/dev/nvidia0.
 * `access` follows symlinks, like Python's Path.exists in the seed.
 */
export async function checkDevices(devRoot: string, devices: DeclaredDevice[]): Promise<DeviceCheck[]> {
  return Promise.all(
    devices.map(async (d) => {
      const checked = path.join(devRoot, d.path);
      const present = await access(checked).then(
        () => true,
        () => false,
      );
      return { path: d.path, checked, input: d.input, present };
    }),
  );
}
