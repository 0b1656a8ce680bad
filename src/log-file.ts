// narwhal.log, the operator's record: JSON lines appended (never truncated) to
// a 0600 file, rotated by size (narwhal.log → narwhal.log.1 → … → .keep, the
// oldest dropped). Writes are synchronous: the controller holds the state lock
// and is the only writer, so every line is in the file, whole and in order, by
// the time the call returns — a SIGKILL loses nothing already logged.
import fs from "node:fs";
import TransportStream from "winston-transport";
import { describeFailure, ioFailure } from "./errors.js";

/** winston's formatted line (triple-beam's MESSAGE symbol). */
const MESSAGE = Symbol.for("message");

export interface LogRotation {
  /** Rotate before a line would take the file past this many bytes. */
  maxBytes: number;
  /** Rotated files kept beside the live one (narwhal.log.1 … narwhal.log.<keep>). */
  keep: number;
}

export const DEFAULT_LOG_ROTATION: LogRotation = { maxBytes: 10 * 1024 * 1024, keep: 4 };

// O_NOFOLLOW and O_NONBLOCK: a symlink or a FIFO planted as narwhal.log is refused, never followed or waited on.
const OPEN_FLAGS =
  fs.constants.O_WRONLY |
  fs.constants.O_APPEND |
  fs.constants.O_CREAT |
  fs.constants.O_NOFOLLOW |
  fs.constants.O_NONBLOCK;

function openForAppend(file: string): { fd: number; size: number } {
  let fd: number;
  try {
    fd = fs.openSync(file, OPEN_FLAGS, 0o600);
  } catch (err) {
    throw ioFailure(err, {
      fix: `Make ${file} a regular file in a writable state directory, or choose another --state directory.`,
    });
  }
  const stat = fs.fstatSync(fd);
  if (!stat.isFile()) {
    fs.closeSync(fd);
    throw ioFailure(
      Object.assign(new Error(`${file} is not a regular file`), { code: "EINVAL", syscall: "open", path: file }),
      {
        fix: `Remove ${file} (it must be the narwhal log file) and run the command again.`,
      },
    );
  }
  // A file left with a wider mode (an older version, another umask) is narrowed: the log is the operator's alone.
  if ((stat.mode & 0o777) !== 0o600) fs.fchmodSync(fd, 0o600);
  return { fd, size: stat.size };
}

export class RotatingLogFile extends TransportStream {
  private fd: number | null;
  private size: number;
  /** The last write failure reported on stderr (one line per distinct cause, not one per log line). */
  private reported: string | null = null;

  /** Opens the file at once, so a state directory that cannot take it fails the command that asked. */
  constructor(
    readonly file: string,
    private readonly rotation: LogRotation,
    opts: TransportStream.TransportStreamOptions = {},
  ) {
    super(opts);
    ({ fd: this.fd, size: this.size } = openForAppend(file));
  }

  override log(info: Record<string | symbol, unknown>, next: () => void): void {
    const line = Buffer.from(`${String(info[MESSAGE])}\n`);
    try {
      if (this.size > 0 && this.size + line.length > this.rotation.maxBytes) this.rotate();
      if (this.fd === null) ({ fd: this.fd, size: this.size } = openForAppend(this.file));
      for (let off = 0; off < line.length;) off += fs.writeSync(this.fd, line, off);
      this.size += line.length;
      this.reported = null;
    } catch (err) {
      // The log is evidence, not the state: a failed line is reported where the operator sees it, and the work goes on.
      const why = describeFailure(err);
      if (why !== this.reported) process.stderr.write(`narwhal: cannot write the log file: ${why}\n`);
      this.reported = why;
    }
    next();
  }

  private rotate(): void {
    this.closeFd();
    for (let i = this.rotation.keep - 1; i >= 1; i--) renameIfPresent(`${this.file}.${i}`, `${this.file}.${i + 1}`);
    if (this.rotation.keep >= 1) renameIfPresent(this.file, `${this.file}.1`);
    else fs.rmSync(this.file, { force: true });
    ({ fd: this.fd, size: this.size } = openForAppend(this.file));
  }

  private closeFd(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }

  override close(): void {
    this.closeFd();
  }
}

function renameIfPresent(from: string, to: string): void {
  try {
    fs.renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}
