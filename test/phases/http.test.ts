// httpRequest against a real HTTP server on a kernel-chosen port: what the probes, the start's health
// wait and the KV proofs rely on — the status and body as sent, a JSON body posted, a refused
// connection named by its code, the deadline a TimeoutError, the actor's abort its own reason.
import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpRequest } from "../../src/phases/http.js";

describe("httpRequest", () => {
  let server: http.Server;
  let base: string;
  const seen: Array<{ method: string; url: string; type: string | undefined; auth: string | undefined; body: string }> =
    [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString();
        seen.push({
          method: req.method!,
          url: req.url!,
          type: req.headers["content-type"],
          auth: req.headers.authorization,
          body,
        });
        if (req.url === "/hang") return; // never answers
        res.writeHead(req.url === "/missing" ? 404 : 200, { "Content-Type": "text/plain" });
        res.end(req.url === "/missing" ? "no such route" : `you sent ${Buffer.byteLength(body)} bytes`);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("returns the status and the body as sent, with the caller's headers", async () => {
    const r = await httpRequest(`${base}/missing`, { timeoutMs: 5000, headers: { Authorization: "Bearer k" } });
    expect(r.status).toBe(404);
    expect(r.body.toString()).toBe("no such route");
    expect(seen.at(-1)).toMatchObject({ method: "GET", url: "/missing", auth: "Bearer k", body: "" });
  });

  it("posts a body as JSON", async () => {
    const r = await httpRequest(`${base}/v1/completions`, { timeoutMs: 5000, body: { prompt: "héllo" } });
    expect(r.status).toBe(200);
    expect(seen.at(-1)).toMatchObject({ method: "POST", type: "application/json", body: '{"prompt":"héllo"}' });
    expect(r.body.toString()).toBe(`you sent ${Buffer.byteLength('{"prompt":"héllo"}')} bytes`);
  });

  it("names a refused connection by its code", async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(httpRequest(`http://127.0.0.1:${port}/health`, { timeoutMs: 5000 })).rejects.toThrow(
      new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`),
    );
  });

  it("rejects with a TimeoutError at its deadline, and with the caller's reason when the caller aborts", async () => {
    await expect(httpRequest(`${base}/hang`, { timeoutMs: 200 })).rejects.toMatchObject({ name: "TimeoutError" });
    const ac = new AbortController();
    const cancelled = new Error("the actor stopped");
    const pending = httpRequest(`${base}/hang`, { timeoutMs: 10_000, signal: ac.signal });
    ac.abort(cancelled);
    await expect(pending).rejects.toBe(cancelled);
    // Already aborted: nothing is sent.
    const before = seen.length;
    await expect(httpRequest(`${base}/health`, { timeoutMs: 5000, signal: ac.signal })).rejects.toBe(cancelled);
    expect(seen.length).toBe(before);
  });
});
