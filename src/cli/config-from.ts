// The command line's options as a Config: light to load (no logger, controller or backend), so every
// command reads its configuration without paying for what it does not run.
import { loadConfig, type Config } from "../config.js";

export interface GlobalOptions {
  desired?: string;
  state?: string;
  format?: string;
}

export function configFrom(opts: GlobalOptions): Config {
  return loadConfig({ desired: opts.desired, state: opts.state });
}
