// Watch mode's metrics, when an address is configured: the run's own registry
// (ControllerMetrics) and its HTTP endpoint, bound before the controller takes
// the state lock, closed after the controller has stopped.
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { ControllerMetrics, type MetricsSource } from "./controller-metrics.js";
import { serveMetrics } from "./server.js";
import { parseListenAddress } from "./address.js";
import type { ControllerObserver } from "../controller/observer.js";

export interface RunMetrics {
  observer: ControllerObserver;
  /** The controller the gauges read, once it is open. */
  watch(source: MetricsSource): void;
  close(): Promise<void>;
}

/** Null when config.metrics.address is unset (metrics are off by default). */
export async function startMetrics(config: Config, log: Logger): Promise<RunMetrics | null> {
  if (config.metrics.address === undefined) return null;
  const address = parseListenAddress(config.metrics.address);
  const metrics = new ControllerMetrics(config.metrics.aliveWithinMs);
  const server = await serveMetrics(metrics, address);
  // Tests and operators who asked for port 0 learn the kernel's choice from this line.
  log.info(`metrics served at ${server.url}/metrics, liveness at ${server.url}/healthz`);
  return { observer: metrics, watch: (source) => metrics.watch(source), close: () => server.close() };
}
