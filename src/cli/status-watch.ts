// `narwhal status --watch`: the status again every interval until SIGINT or
// SIGTERM (exit 0). On a terminal it redraws in place (home, clear, draw); into
// a pipe it prints a block, stamped, only when it differs from the last one, so
// a log of it holds each change once.
import type { Config } from "../config.js";
import { readStatus } from "./status-read.js";
import { colours, plain, renderStatusText, type Paint } from "./status-render.js";
import { sleep } from "../phases/http.js";

export interface WatchOptions {
  engine?: string;
  intervalMs: number;
  /** --no-color was given. */
  noColor: boolean;
  tty: NodeJS.WriteStream;
  signal: AbortSignal;
}

/** Colour only on a terminal, and neither with NO_COLOR nor with --no-color. */
export function paintFor(stream: NodeJS.WriteStream, config: Pick<Config, "noColor">, noColorFlag: boolean): Paint {
  return stream.isTTY && !config.noColor && !noColorFlag ? colours : plain;
}

/** How a look reads and renders the status; the defaults are the real ones (a test counts their calls). */
export interface WatchIo {
  read: typeof readStatus;
  render: typeof renderStatusText;
}

export async function watchStatus(
  config: Config,
  opts: WatchOptions,
  write: (s: string) => void,
  io: WatchIo = { read: readStatus, render: renderStatusText },
): Promise<void> {
  const paint = paintFor(opts.tty, config, opts.noColor);
  const detail = !!opts.engine;
  let last = "";
  while (!opts.signal.aborted) {
    const now = Date.now();
    const view = await io.read(config, opts.engine);
    if (opts.tty.isTTY) {
      // Redrawn every look: one render, no comparison.
      const text = io.render(view, detail, now, paint);
      write(`\x1b[H\x1b[2J${new Date(now).toISOString()}  every ${opts.intervalMs / 1000} s\n${text}`);
    } else {
      // What changed, ages aside: rendered as of the epoch, every age reads 0s. Into a pipe that
      // render is the look's only one unless it changed; then the block is rendered with its ages.
      const key = io.render(view, detail, 0);
      if (key !== last) write(`--- ${new Date(now).toISOString()}\n${io.render(view, detail, now, paint)}`);
      last = key;
    }
    await sleep(opts.intervalMs, opts.signal).catch(() => undefined);
  }
}
