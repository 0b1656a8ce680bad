// The HTTP endpoint of watch mode's metrics: GET /metrics (Prometheus text
// exposition of the run's own registry) and GET /healthz (200 while the
// controller loop is alive, 503 otherwise, with one line saying why).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { NarwhalError } from "../errors.js";
import type { ControllerMetrics } from "./controller-metrics.js";
import { METRICS_INPUT, type ListenAddress } from "./address.js";

/** A URL host part: an IPv6 address in brackets. */
const urlHost = (host: string) => (host.includes(":") ? `[${host}]` : host);

export interface MetricsServer {
  /** Where it listens, as a URL base (http://127.0.0.1:9464). */
  url: string;
  close(): Promise<void>;
}

function respond(res: http.ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { "Content-Type": type, "Cache-Control": "no-store" });
  res.end(body);
}

/** Listen on `address`; rejects with a NarwhalError naming the address when it cannot be bound. */
export async function serveMetrics(metrics: ControllerMetrics, address: ListenAddress): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return respond(res, 405, "text/plain", "only GET\n");
    if (path === "/healthz") {
      const { alive, why } = metrics.liveness();
      return respond(res, alive ? 200 : 503, "text/plain; charset=utf-8", `${alive ? "ok" : "unhealthy"}: ${why}\n`);
    }
    if (path !== "/metrics") return respond(res, 404, "text/plain", "not found: try /metrics or /healthz\n");
    void metrics.registry.metrics().then(
      (body) => respond(res, 200, metrics.registry.contentType, body),
      (err: unknown) => respond(res, 500, "text/plain", `cannot collect metrics: ${String(err)}\n`),
    );
  });
  // A scraper that keeps its connection open must not hold the controller's shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        new NarwhalError(
          `cannot serve metrics on ${urlHost(address.host)}:${address.port}: ${err.code ?? err.message}`,
          {
            input: METRICS_INPUT,
            fix:
              err.code === "EADDRINUSE"
                ? "Another process listens on that port: choose another port, or stop that process."
                : "Choose an address of this host (a bare port listens on loopback).",
            cause: err,
          },
        ),
      ),
    );
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return {
    url: `http://${urlHost(address.host)}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
