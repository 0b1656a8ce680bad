// Files placed on a node as they must be, immutable once there (a run's plan, environment and check script on
// the engine's node): a file that is absent is written (atomically, with its mode), one with the same bytes is
// left, one with other bytes is reported, never overwritten. Over SSH one helper script places them all
// (ENSURE_FILES: each file was a stat, then a read or a write, a command each: about a third of the ssh commands
// of a cold converge over ssh); elsewhere the host's own calls do it, file by file.
import { IoError } from "../errors.js";
import { STDLIB_FLAGS } from "./stdlib-python.js";
import { remoteIoError } from "./ssh-scripts.js";
import type { HostAccess } from "./types.js";

export interface NodeFile {
  path: string;
  data: Buffer;
  mode: number;
}

/** Per file: "written" (it was absent), "same" (it held these bytes), "other" (it holds other bytes: left). */
export type Placed = "written" | "same" | "other";

/** ensureFiles through the host's own calls: stat, then a read to compare or a write. */
export async function ensureFilesVia(host: HostAccess, files: NodeFile[]): Promise<Placed[]> {
  const placed: Placed[] = [];
  for (const f of files) {
    if (await host.stat(f.path)) {
      const held = await host.readFile(f.path, { maxBytes: f.data.length }).catch((err: unknown) => {
        if (err instanceof IoError && err.code === "EFBIG") return null; // longer: other bytes
        throw err;
      });
      placed.push(held?.equals(f.data) ? "same" : "other");
    } else {
      await host.writeFile(f.path, f.data, f.mode);
      placed.push("written");
    }
  }
  return placed;
}

/**
 * $1 the helper interpreter; stdin: JSON [[path, octal mode, base64 data], ...]. stdout: JSON, one entry per
 * file: "written", "same", "other", or [syscall, errno name, message] of the OSError that stopped it (the files
 * after it are not placed). A write is WRITE_FILE's: parents created 0700, a temp file beside it (0600) written
 * and synced, its mode set, renamed over the path, the directory synced.
 */
export const ENSURE_FILES = `exec "$1" ${STDLIB_FLAGS.join(" ")} -c '
import base64, errno, json, os, sys
os.umask(0o077)
out = []
def place(path, mode, data):
    try:
        with open(path, "rb") as held:
            return "same" if held.read(len(data) + 1) == data else "other"
    except FileNotFoundError:
        pass
    d = os.path.dirname(path) or "/"
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".%s.narwhal.%d.tmp" % (os.path.basename(path), os.getpid()))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return "written"
for path, mode, data in json.load(sys.stdin):
    try:
        out.append(place(path, int(mode, 8), base64.b64decode(data)))
    except OSError as e:
        out.append(["open", errno.errorcode.get(e.errno, "EIO"), "%s: %s" % (e.strerror, path)])
        break
json.dump(out, sys.stdout)
'`;

/** ENSURE_FILES' stdin for `files`. */
export const ensureFilesInput = (files: NodeFile[]): string =>
  JSON.stringify(files.map((f) => [f.path, f.mode.toString(8), f.data.toString("base64")]));

/** ENSURE_FILES' stdout: each file's outcome; the OSError that stopped it as the IoError a local write gives. */
export function parseEnsureFiles(node: string, files: NodeFile[], stdout: string): Placed[] {
  const out = JSON.parse(stdout) as Array<Placed | [string, string, string]>;
  return files.map((f, i) => {
    const r = out[i];
    if (typeof r === "string") return r;
    if (Array.isArray(r)) throw remoteIoError(node, r[0], f.path, r[2], r[1]);
    throw remoteIoError(node, "open", f.path, "not placed: an earlier file failed");
  });
}
