// The live view on a terminal: one line per engine in a step, redrawn in place at
// the bottom of stderr once a second, with log lines scrolling above it (they
// reach the console through this view, so a line never lands inside the block).
// Not a terminal: no view at all; the log's plain lines (each awaited condition
// is one) are what a pipe or a CI log shows.
import { Writable } from "node:stream";
import type { StepProgress } from "../phases/progress.js";
import { applyProgress, progressLines, type ProgressBoard } from "./progress-view.js";

const REDRAW_MS = 1000;

export interface LiveView {
  /** Console log lines go through this stream: written above the live block. */
  readonly logStream: Writable;
  update(engine: string, p: StepProgress): void;
  /** Erase the block and stop redrawing (the command's own output follows). */
  close(): void;
}

/** The live view on `tty`, or null when it is not a terminal. */
export function liveView(tty: NodeJS.WriteStream, now: () => number = Date.now): LiveView | null {
  if (!tty.isTTY) return null;
  let board: ProgressBoard = new Map();
  let drawn = 0;
  let closed = false;
  const fit = (line: string) => {
    // A line wider than the terminal wraps, and the block would no longer be `drawn` lines high.
    const columns = tty.columns || 80;
    return line.length < columns ? line : line.slice(0, Math.max(1, columns - 2)) + "…";
  };
  const erase = () => {
    if (drawn > 0) tty.write(`\x1b[${drawn}A\r\x1b[J`);
    drawn = 0;
  };
  const draw = () => {
    if (closed) return;
    const lines = progressLines(board, now()).map(fit);
    erase();
    if (lines.length) tty.write(lines.join("\n") + "\n");
    drawn = lines.length;
  };
  const timer = setInterval(draw, REDRAW_MS);
  // The view never keeps a finished command alive.
  timer.unref();
  const logStream = new Writable({
    write(chunk: Buffer | string, _enc, done) {
      erase();
      tty.write(chunk, () => {
        draw();
        done();
      });
    },
  });
  return {
    logStream,
    update(engine, p) {
      board = applyProgress(board, engine, p, now());
      draw();
    },
    close() {
      clearInterval(timer);
      erase();
      closed = true;
    },
  };
}
