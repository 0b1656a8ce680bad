// A remote command's stdin and stdout as one byte stream (what `docker system
// dial-stdio` over ssh is to an HTTP client): bytes written go to the command,
// bytes it prints are read. The stream ends only once the local client has
// exited, so a failure of the connection or of the command is what it ends
// with (an error an HTTP client passes on), never a bare "socket hang up".
import type { ChildProcess } from "node:child_process";
import { Duplex } from "node:stream";

/** Why a finished command failed, or null when its exit was a clean end of the stream. */
export type StreamFailure = (r: { code: number | null; signal: string | null; stderr: string }) => Error | null;

/** A client that outlives SIGTERM this long is sent SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** Most bytes of the client's stderr kept for the failure's message. */
const MAX_STDERR_BYTES = 64 * 1024;

export function childStream(child: ChildProcess, failure: StreamFailure): Duplex {
  const { stdin, stdout, stderr } = child;
  if (!stdin || !stdout || !stderr) throw new Error("internal: childStream needs a child with piped stdio");
  let err = "";
  let exited = false;
  const stream = new Duplex({
    read: () => void stdout.resume(),
    // A write the command did not take (EPIPE: it exited first) is not the stream's failure: its exit is.
    write: (chunk: Buffer, _enc, done) => {
      if (exited || stdin.destroyed) return done();
      stdin.write(chunk, () => done());
    },
    final: (done) => {
      stdin.end();
      done();
    },
    destroy: (e, done) => {
      if (exited) return done(e);
      // Ending the local client ends the channel; the remote command sees its stdin close. The stream
      // is closed once the client is gone, so a closed stream no longer holds a session on the master.
      const kill = setTimeout(() => signalGroup(child, "SIGKILL"), KILL_GRACE_MS);
      child.once("close", () => {
        clearTimeout(kill);
        done(e);
      });
      signalGroup(child, "SIGTERM");
      // Unread output would keep the pipe, and so the child's "close", from ever ending.
      stdout.destroy();
    },
  });
  stdout.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) stdout.pause();
  });
  stderr.on("data", (chunk: Buffer) => {
    if (err.length < MAX_STDERR_BYTES) err += chunk.toString("utf8");
  });
  stdin.on("error", () => undefined);
  child.once("error", (e) => stream.destroy(e));
  child.once("close", (code, signal) => {
    exited = true;
    if (stream.destroyed) return;
    const failed = failure({ code, signal, stderr: err });
    if (failed) stream.destroy(failed);
    else stream.push(null);
  });
  return stream;
}

function signalGroup(child: ChildProcess, sig: NodeJS.Signals): void {
  try {
    // The client leads its own process group (spawned detached): end all of it.
    if (child.pid) process.kill(-child.pid, sig);
  } catch {
    /* already gone */
  }
}
