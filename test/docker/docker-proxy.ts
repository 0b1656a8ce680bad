// A Docker API proxy on its own unix socket, in front of the real daemon: it
// records every call (so a test can assert "no write calls") and injects
// faults on the calls a rule matches — stall the response, answer 500, or drop
// the connection. The request still reaches the daemon when the response is
// stalled, which is the hard case: the container exists, the caller never hears.
import http from "node:http";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";

export interface ProxyRule {
  method?: string;
  path: RegExp;
  action: "stall" | "error500" | "drop";
  /** For stall: how long to hold the response (default: until the proxy closes). */
  ms?: number;
  /** For stall: hold the response until this settles (a test's release), instead of for `ms`. */
  until?: Promise<unknown>;
  /** How many matching calls to affect (default: all). */
  times?: number;
  /**
   * Affect only calls after one matching this has passed (e.g. an engine's own create), so a fault
   * meant for that engine's containers never lands on an earlier helper container's same call.
   */
  armedBy?: RegExp;
}

export interface DockerProxy {
  /** unix:// URI to use as DOCKER_HOST. */
  host: string;
  calls: Array<{ method: string; path: string }>;
  rules: ProxyRule[];
  writes(): Array<{ method: string; path: string }>;
  /** Requests received whose response has not ended (answered, failed or given up by the caller). */
  open(): number;
  /** The most requests open at once since the last call (then reset to those open now). */
  takeMaxOpen(): number;
  close(): Promise<void>;
}

export async function startDockerProxy(upstream: string): Promise<DockerProxy> {
  const upstreamSocket = new URL(upstream).pathname;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-dproxy-"));
  const socket = path.join(dir, "docker.sock");
  const calls: DockerProxy["calls"] = [];
  const rules: ProxyRule[] = [];
  const held = new Set<NodeJS.Timeout>();
  let open = 0;
  let maxOpen = 0;
  const armed = new Set<ProxyRule>();
  const server = http.createServer((req, res) => {
    const call = { method: req.method ?? "GET", path: (req.url ?? "").replace(/^\/v[\d.]+/, "") };
    calls.push(call);
    open++;
    maxOpen = Math.max(maxOpen, open);
    res.once("close", () => open--);
    const rule = rules.find(
      (r) =>
        (r.method ?? call.method) === call.method &&
        r.path.test(call.path) &&
        (r.times ?? 1) > 0 &&
        (!r.armedBy || armed.has(r)),
    );
    for (const r of rules) if (r.armedBy?.test(call.path)) armed.add(r);
    if (rule && rule.times !== undefined) rule.times--;
    if (rule?.action === "error500") {
      req.resume();
      res.writeHead(500, { "Content-Type": "application/json" }).end('{"message":"injected fault"}');
      return;
    }
    if (rule?.action === "drop") {
      req.socket.destroy();
      return;
    }
    const up = http.request(
      { socketPath: upstreamSocket, method: req.method, path: req.url, headers: req.headers },
      (ur) => {
        const send = () => {
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          ur.pipe(res);
        };
        if (rule?.action === "stall") {
          if (rule.until) void rule.until.then(send, send);
          else if (rule.ms !== undefined) {
            const t = setTimeout(send, rule.ms);
            held.add(t);
          }
          // else: held until the caller gives up
        } else send();
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    host: `unix://${socket}`,
    calls,
    rules,
    writes: () => calls.filter((c) => c.method !== "GET" && c.method !== "HEAD"),
    open: () => open,
    takeMaxOpen: () => {
      const most = maxOpen;
      maxOpen = open;
      return most;
    },
    close: async () => {
      for (const t of held) clearTimeout(t);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
