// The command's stdout and stderr. Through a pipe, Node writes what the pipe
// takes (64 KiB) and queues the rest: exiting before the queue drains cuts the
// output, so every command flushes both before it exits. A reader that goes
// away (`narwhal reconcile --once | head -3`) is not a failure of the command:
// EPIPE is ignored, the work finishes and the exit code stays what it was.
import { IoError } from "../errors.js";

export interface CliOutput {
  out(s: string): void;
  err(s: string): void;
  /** Wait until everything written has reached the pipe or file; a failed write (but EPIPE) is an IoError. */
  flush(): Promise<void>;
}

interface Channel {
  stream: NodeJS.WriteStream;
  name: "stdout" | "stderr";
  /** The reader closed the pipe: further writes go nowhere, by design. */
  closed: boolean;
  failure: NodeJS.ErrnoException | null;
}

const line = (s: string) => (s.endsWith("\n") ? s : s + "\n");

export function cliOutput(
  stdout: NodeJS.WriteStream = process.stdout,
  stderr: NodeJS.WriteStream = process.stderr,
): CliOutput {
  const channels = [
    { stream: stdout, name: "stdout", closed: false, failure: null },
    { stream: stderr, name: "stderr", closed: false, failure: null },
  ] satisfies Channel[] as Channel[];
  for (const c of channels) {
    // Without a listener an EPIPE is an uncaught exception that kills the controller mid-step.
    c.stream.on("error", (e: NodeJS.ErrnoException) => {
      // After EPIPE the stream is destroyed and later writes report ERR_STREAM_DESTROYED: the same closed reader.
      if (e.code === "EPIPE" || c.closed) c.closed = true;
      else c.failure ??= e;
    });
  }
  const write = (c: Channel, s: string) => {
    if (!c.closed && !c.stream.destroyed) c.stream.write(line(s));
  };
  const drained = (c: Channel) =>
    new Promise<void>((resolve) => {
      if (c.closed || c.stream.destroyed) return resolve();
      // Writes complete in order: the callback of an empty write comes after every earlier write.
      c.stream.write("", (e) => {
        const code = (e as NodeJS.ErrnoException | null | undefined)?.code;
        if (code === "EPIPE") c.closed = true;
        else if (e) c.failure ??= e as NodeJS.ErrnoException;
        resolve();
      });
    });
  return {
    out: (s) => write(channels[0]!, s),
    err: (s) => write(channels[1]!, s),
    flush: async () => {
      await Promise.all(channels.map(drained));
      const failed = channels.find((c) => c.failure);
      if (failed?.failure) {
        const e = failed.failure;
        throw new IoError(`cannot write the command's ${failed.name}: ${e.code ?? "error"} (${e.message})`, {
          path: failed.name,
          code: e.code ?? "EIO",
          fix: `The output is incomplete: check where ${failed.name} goes (disk space, the file or pipe it is redirected to) and run the command again.`,
        });
      }
    },
  };
}
