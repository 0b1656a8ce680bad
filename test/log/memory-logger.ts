// A logger that keeps its lines in memory, for tests that read what was said (no console, no narwhal.log).
import { redactText, type Logger } from "../../src/log.js";

export interface LogLine {
  level: string;
  message: string;
  meta: Record<string, unknown>;
}

/**
 * A logger that keeps every line in memory (secrets redacted as src/log.ts does), at every
 * level: stopCount reads the phase actors' debug lines. Nothing goes to the console.
 */
export function memoryLogger(): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const secrets = new Set<string>();
  const make = (base: Record<string, unknown>): Logger => {
    const put = (level: string) => (message: string, meta?: Record<string, unknown>) => {
      lines.push({ level, message: redactText(message, secrets), meta: { ...base, ...meta } });
    };
    return {
      debug: put("debug"),
      info: put("info"),
      warn: put("warn"),
      error: put("error"),
      child: (meta) => make({ ...base, ...meta }),
      addSecrets: (values) => {
        for (const v of values) if (v) secrets.add(v);
      },
      // narwhal.log is the CLI's record; the harness reads its lines from memory.
      recordTo: () => undefined,
      close: async () => undefined,
    };
  };
  return { log: make({}), lines };
}
