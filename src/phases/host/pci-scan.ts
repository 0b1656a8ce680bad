// PCI accelerator scan (seed 000, "Inspect every engine host"): the same walk
// as the seed's shell loop over /sys/bus/pci/devices, against any sysfs root so
// tests can point it at a fixture tree.

import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { NarwhalError } from "../../errors.js";

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
 * Read class and vendor of every device under <sysfsRoot>/bus/pci/devices.
 * Real sysfs entries are symlinks into /sys/devices; fixtures may use plain
 * directories. Entries without readable class/vendor are skipped, like the seed's
 * `test -r ... || continue`.
 */
export async function readPciDevices(sysfsRoot: string): Promise<PciDevice[]> {
  const dir = path.join(sysfsRoot, "bus", "pci", "devices");
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    throw new NarwhalError(
      `${NO_PCI_ACCELERATOR} ${dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`,
      {
        input: "node.sysfs_root",
        fix: "Point node.sysfs_root at the host's sysfs (default /sys) and make sure it is mounted.",
        retryable: false,
        cause: err,
      },
    );
  }
  const devices = await Promise.all(
    names.sort().map(async (address): Promise<PciDevice | undefined> => {
      try {
        const [cls, vendor] = await Promise.all([
          readFile(path.join(dir, address, "class"), "utf8"),
          readFile(path.join(dir, address, "vendor"), "utf8"),
        ]);
        return { address, class: cls.trim(), vendor: vendor.trim() };
      } catch {
        return undefined;
      }
    }),
  );
  return devices.filter((d): d is PciDevice => d !== undefined);
}

/** Scan for accelerators; throws the seed's error when there is none. */
export async function scanPciAccelerators(sysfsRoot: string): Promise<PciScan> {
  const accelerators: PciAccelerator[] = [];
  for (const device of await readPciDevices(sysfsRoot)) {
    const gpuVendor = classifyPciDevice(device.class, device.vendor);
    if (gpuVendor) accelerators.push({ ...device, gpu_vendor: gpuVendor });
  }
  if (accelerators.length === 0) {
    throw new NarwhalError(
      `${NO_PCI_ACCELERATOR} No NVIDIA or AMD display/accelerator device under ${sysfsRoot}/bus/pci/devices.`,
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
