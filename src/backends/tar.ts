// A minimal ustar writer: enough to hand a container a few small files
// (the check script, its input, the API key) through the Docker API's
// archive upload, which works on remote daemons where bind mounts of the
// controller's files cannot.
export interface TarEntry {
  /** Path inside the archive, without a leading slash; a trailing "/" makes a directory. */
  name: string;
  data?: Buffer | string;
  mode: number;
}

function header(name: string, size: number, mode: number, type: "0" | "5"): Buffer {
  const h = Buffer.alloc(512, 0);
  if (Buffer.byteLength(name) > 99) throw new Error(`tar entry name too long: ${name}`);
  h.write(name, 0, 100, "utf8");
  h.write(mode.toString(8).padStart(7, "0") + "\0", 100, 8, "ascii");
  h.write("0000000\0", 108, 8, "ascii"); // uid root
  h.write("0000000\0", 116, 8, "ascii"); // gid root
  h.write(size.toString(8).padStart(11, "0") + "\0", 124, 12, "ascii");
  h.write(
    Math.floor(Date.now() / 1000)
      .toString(8)
      .padStart(11, "0") + "\0",
    136,
    12,
    "ascii",
  );
  h.write("        ", 148, 8, "ascii"); // checksum placeholder: spaces while summing
  h.write(type, 156, 1, "ascii");
  h.write("ustar\0", 257, 6, "ascii");
  h.write("00", 263, 2, "ascii");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
  return h;
}

export function tarArchive(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    if (e.name.endsWith("/")) {
      parts.push(header(e.name, 0, e.mode, "5"));
      continue;
    }
    const data = Buffer.isBuffer(e.data) ? e.data : Buffer.from(e.data ?? "", "utf8");
    parts.push(header(e.name, data.length, e.mode, "0"), data, Buffer.alloc((512 - (data.length % 512)) % 512, 0));
  }
  parts.push(Buffer.alloc(1024, 0));
  return Buffer.concat(parts);
}

/** The first regular file of a tar stream (Docker's archive download of one path): its mode and bytes. */
export function firstTarFile(tar: Buffer): { name: string; mode: number; data: Buffer } | null {
  let off = 0;
  while (off + 512 <= tar.length) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) return null; // end-of-archive marker
    const field = (start: number, len: number) =>
      h
        .toString("ascii", start, start + len)
        .replace(/\0.*$/s, "")
        .trim();
    const size = parseInt(field(124, 12) || "0", 8);
    const type = field(156, 1) || "0";
    if (type === "0") {
      return {
        name: h.toString("utf8", 0, 100).replace(/\0.*$/s, ""),
        mode: parseInt(field(100, 8) || "0", 8) & 0o7777,
        data: tar.subarray(off + 512, off + 512 + size),
      };
    }
    off += 512 + Math.ceil(size / 512) * 512; // skip directories, pax headers, links
  }
  return null;
}
