// The logger behind a small interface. Console output is for people; the JSON
// lines file in the state directory is for machines. Every known secret value
// is replaced before a line reaches either transport.
import winston from "winston";
import path from "node:path";
import { DEFAULT_LOG_ROTATION, RotatingLogFile, type LogRotation } from "./log-file.js";

export interface Logger {
  debug(msg: string, meta?: Record<string, unknown>): void;
  info(msg: string, meta?: Record<string, unknown>): void;
  warn(msg: string, meta?: Record<string, unknown>): void;
  error(msg: string, meta?: Record<string, unknown>): void;
  child(meta: Record<string, unknown>): Logger;
  /** Register values (API keys) that must never be written in clear. */
  addSecrets(values: Iterable<string>): void;
  /**
   * Also write to <stateDir>/narwhal.log (appended, 0600, rotated by size). Called only by the
   * holder of the state lock: a command refused the lock must not touch the live controller's log.
   * Throws an IoError (path, errno) if the file cannot be opened. Once per logger; later calls are no-ops.
   */
  recordTo(stateDir: string): void;
  close(): Promise<void>;
}

export const REDACTED = "<redacted>";

export function redactText(text: string, secrets: Iterable<string>): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join(REDACTED);
  return out;
}

function redactDeep(value: unknown, secrets: Set<string>, depth = 0): unknown {
  if (depth > 8) return value;
  if (typeof value === "string") return redactText(value, secrets);
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, secrets, depth + 1));
  if (value && typeof value === "object" && !(value instanceof Error)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] =
        /api[_-]?key|authorization|secret|token$/i.test(k) && typeof v === "string"
          ? REDACTED
          : redactDeep(v, secrets, depth + 1);
    }
    return out;
  }
  return value;
}

export interface LoggerOptions {
  level: string;
  /** Directory for narwhal.log (JSON lines) from the start; omitted = console only until recordTo(). */
  stateDir?: string;
  console?: boolean;
  /** Where console lines go instead of stderr (the terminal's live view, which draws below them). */
  consoleStream?: NodeJS.WritableStream;
  rotation?: LogRotation;
}

export const LOG_FILE = "narwhal.log";

export function createLogger(opts: LoggerOptions): Logger {
  const secrets = new Set<string>();
  const redact = winston.format((info) => {
    const cleaned = redactDeep({ ...info }, secrets) as Record<string | symbol, unknown>;
    for (const key of Object.keys(cleaned)) (info as Record<string, unknown>)[key] = cleaned[key];
    return info;
  });
  const transports: winston.transport[] = [];
  if (opts.console !== false) {
    const format = winston.format.combine(
      winston.format.timestamp({ format: "HH:mm:ss" }),
      winston.format.printf(({ timestamp, level, message, engine, step }) => {
        const where = [engine, step].filter(Boolean).join(" ");
        return `${timestamp} ${level.padEnd(5)} ${where ? `[${where}] ` : ""}${message}`;
      }),
    );
    transports.push(
      opts.consoleStream
        ? new winston.transports.Stream({ stream: opts.consoleStream, format })
        : new winston.transports.Console({ stderrLevels: ["error", "warn", "info", "debug"], format }),
    );
  }
  const root = winston.createLogger({ level: opts.level, format: redact(), transports });
  let file: RotatingLogFile | null = null;
  const recordTo = (stateDir: string) => {
    if (file) return;
    file = new RotatingLogFile(path.join(stateDir, LOG_FILE), opts.rotation ?? DEFAULT_LOG_ROTATION, {
      format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
    });
    transports.push(file);
    root.add(file);
  };
  if (opts.stateDir) recordTo(opts.stateDir);
  const wrap = (w: winston.Logger): Logger => ({
    // winston formats (and redacts) a message before any transport drops it for its level: a no-op of
    // 64 engines spent 13 ms so on debug lines nothing printed.
    debug: (m, meta) => void (w.isLevelEnabled("debug") && w.debug(m, meta)),
    info: (m, meta) => void w.info(m, meta),
    warn: (m, meta) => void w.warn(m, meta),
    error: (m, meta) => void w.error(m, meta),
    child: (meta) => wrap(w.child(meta)),
    addSecrets: (values) => {
      for (const v of values) if (v) secrets.add(v);
    },
    recordTo,
    close: () =>
      new Promise<void>((resolve) => {
        if (transports.length === 0) return resolve();
        // Bounded, and a referenced timer: a transport that never finishes must not leave the command pending.
        const timer = setTimeout(done, 500);
        function done() {
          clearTimeout(timer);
          file?.close();
          resolve();
        }
        root.on("finish", done);
        root.end();
      }),
  });
  return wrap(root);
}
