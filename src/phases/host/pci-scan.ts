// PCI accelerator scan (seed 000, "Inspect every engine host"): the same walk
// as the seed's shell loop over /sys/bus/pci/devices, against any sysfs root so
// tests can point it at a fixture tree.

import path from "node:path";
import { NarwhalError } from "../../errors.js";
import type { HostAccess } from "../../hosts/types.js";

export type GpuVendor = "nvidia" | "amd";

export interface PciDevice {
  /** Directory name, e.g. "0000:18:00.0". */
  address: string;
  /** Contents of `class`, e.g. "0x030200". */
  class: string;
  /** Contents of `vendor`, e.g. "0x10de". */
  vendor: string;
}

export interface PciAccelerator extends PciDevice {
  gpu_vendor: GpuVendor;
}

export interface PciScan {
  /** Distinct GPU vendors present, in first-seen order. */
  vendors: GpuVendor[];
  accelerators: PciAccelerator[];
}

/** The seed's wording when the scan finds no accelerator. */
export const NO_PCI_ACCELERATOR = "Inspect GPU PCI device exposure on this engine host.";

const VENDOR_IDS: Record<string, GpuVendor> = { "0x10de": "nvidia", "0x1002": "amd" };

/**
 * Display controllers (0x03*) and processing accelerators (0x12*, e.g. MI300X)
 * from NVIDIA or AMD count; everything else (NICs, bridges, a BMC's VGA) does not.
 */
export function classifyPciDevice(pciClass: string, vendor: string): GpuVendor | undefined {
  const cls = pciClass.trim().toLowerCase();
  if (!cls.startsWith("0x03") && !cls.startsWith("0x12")) return undefined;
  return VENDOR_IDS[vendor.trim().toLowerCase()];
}

/**
 * The seed's walk, run on the node as one sh process: "<address> <class> <vendor>"
 * per device whose class and vendor are readable (`test -r ... || continue`).
 * One process, not two reads per device: a host has a hundred PCI functions and
 * each read on a remote node is a round trip. The files are read with the shell's own `read`, not
 * `$(cat …)`: that forked two processes per device (200 on such a host, at every inspection).
 * `read` fails at a last line without a newline but keeps what it read: `|| :`.
 * Exit 3: no such directory; 4: not readable.
 */
const PCI_WALK = `[ -e "$1" ] || exit 3; cd -- "$1" 2>/dev/null || exit 4
for d in *; do
  test -r "$d/class" && test -r "$d/vendor" || continue
  c=; v=
  read -r c < "$d/class" || :
  read -r v < "$d/vendor" || :
  printf '%s %s %s\\n' "$d" "$c" "$v"
done`;

/**
 * Read class and vendor of every device under <sysfsRoot>/bus/pci/devices on
 * the engine's node. Real sysfs entries are symlinks into /sys/devices;
 * fixtures may use plain directories.
 */
export async function readPciDevices(host: HostAccess, sysfsRoot: string, signal?: AbortSignal): Promise<PciDevice[]> {
  const dir = path.posix.join(sysfsRoot, "bus", "pci", "devices");
  const r = await host.run(["/bin/sh", "-c", PCI_WALK, "sh", dir], {
    env: { LC_ALL: "C" },
    timeoutMs: 30_000,
    ...(signal ? { signal } : {}),
  });
  if (r.code !== 0) {
    const why = r.code === 3 ? "ENOENT" : r.code === 4 ? "EACCES" : `exit ${r.code ?? r.signal}: ${r.stderr.trim()}`;
    throw new NarwhalError(`${NO_PCI_ACCELERATOR} ${dir} cannot be read on node ${host.node} (${why})`, {
      input: "node.sysfs_root",
      fix: `Point node.sysfs_root at node ${host.node}'s sysfs (default /sys) and make sure it is mounted there.`,
      // A walk that timed out may finish next time; a missing or unreadable directory will not.
      retryable: r.timedOut,
    });
  }
  return r.stdout
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((f): f is [string, string, string] => f.length === 3)
    .map(([address, cls, vendor]) => ({ address, class: cls, vendor }))
    .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/** Scan for accelerators; throws the seed's error when there is none. */
export async function scanPciAccelerators(host: HostAccess, sysfsRoot: string, signal?: AbortSignal): Promise<PciScan> {
  const accelerators: PciAccelerator[] = [];
  for (const device of await readPciDevices(host, sysfsRoot, signal)) {
    const gpuVendor = classifyPciDevice(device.class, device.vendor);
    if (gpuVendor) accelerators.push({ ...device, gpu_vendor: gpuVendor });
  }
  if (accelerators.length === 0) {
    throw new NarwhalError(
      `${NO_PCI_ACCELERATOR} No NVIDIA or AMD display/accelerator device under ${sysfsRoot}/bus/pci/devices on node ${host.node}.`,
      {
        input: "node.sysfs_root",
        fix: "Expose the host's GPUs (PCI passthrough, driver binding) or place this engine on a GPU host.",
        retryable: false,
      },
    );
  }
  const vendors = [...new Set(accelerators.map((a) => a.gpu_vendor))];
  return { vendors, accelerators };
}
