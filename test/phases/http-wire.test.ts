// The HTTP/1.1 exchanges of http-wire.ts against a real TCP server that answers byte for byte as a test
// scripts it: how a response ends (Content-Length, last chunk, the server's close) whatever the
// packets, interim answers skipped, a connection cut short or a response that is not HTTP refused,
// what the server is sent, and GETs pipelined on one connection (sent again where it closed early).
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpGets, httpRequest } from "../../src/phases/http.js";
import { wireExchange, type WireResponse } from "../../src/phases/http-wire.js";

/**
 * Writes a response in pieces, a pause apart (each its own packet on loopback: nodelay), then closes the
 * connection if `close` (requests pipelined after it go unanswered).
 */
type Script = { pieces: string[]; close: boolean | "reset"; delayMs?: number };

/** An answer that is a response (the test fails on an Error, naming it). */
function response(a: WireResponse | Error | undefined): WireResponse {
  if (!a || a instanceof Error) throw new Error(`no response: ${String(a)}`);
  return a;
}

describe("http-wire (httpRequest and httpGets of http: URLs)", () => {
  let server: net.Server;
  let base: string;
  const scripts = new Map<string, Script>();
  /** Each request head as received, with the number of the connection it came on. */
  const received: Array<{ head: string; connection: number }> = [];
  let connections = 0;

  beforeAll(async () => {
    server = net.createServer((socket) => {
      socket.setNoDelay(true);
      const connection = ++connections;
      let text = "";
      // Requests (GETs: heads only) answered one after another, in the order they came.
      let answering: Promise<void> = Promise.resolve();
      let closed = false;
      socket.on("data", (d: Buffer) => {
        text += d.toString("latin1");
        for (let end = text.indexOf("\r\n\r\n"); end >= 0; end = text.indexOf("\r\n\r\n")) {
          const head = text.slice(0, end + 4);
          text = text.slice(end + 4);
          received.push({ head, connection });
          const script = scripts.get(/^[A-Z]+ (\S+)/.exec(head)?.[1] ?? "")!;
          answering = answering.then(async () => {
            if (closed) return;
            if (script.delayMs) await new Promise((r) => setTimeout(r, script.delayMs));
            for (const piece of script.pieces) {
              socket.write(piece);
              await new Promise((r) => setTimeout(r, 15));
            }
            if (script.close) {
              closed = true;
              if (script.close === "reset") socket.resetAndDestroy();
              else socket.end();
            }
          });
        }
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const get = (path: string, script: Script, headers?: Record<string, string>) => {
    scripts.set(path, script);
    return httpRequest(`${base}${path}`, { timeoutMs: 3000, ...(headers ? { headers } : {}) });
  };

  it("reads to the Content-Length without waiting for a close, the head split anywhere", async () => {
    const r = await get("/length", {
      pieces: ["HTTP/1.1 200 OK\r\nContent-Le", "ngth: 11\r\n\r\nhello", " world", "trailing junk"],
      close: false,
    });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("hello world");
  });

  it("decodes a chunked body whose last chunk comes alone, without waiting for a close", async () => {
    const r = await get("/chunked", {
      pieces: [
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "5\r\nvllm:\r\n",
        "b;ext=1\r\n_num_prompt\r\n",
        "0\r\n\r\n",
      ],
      close: false,
    });
    expect(r.body.toString()).toBe("vllm:_num_prompt");
  });

  it("reads an empty chunked body, and a body without a length to the server's close", async () => {
    const empty = await get("/empty", {
      pieces: ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"],
      close: false,
    });
    expect([empty.status, empty.body.length]).toEqual([200, 0]);
    // 204 has no body whatever its headers say, and what follows the answer is not read.
    const none = await get("/none", {
      pieces: ["HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\njunk"],
      close: false,
    });
    expect([none.status, none.body.length]).toEqual([204, 0]);
    const toClose = await get("/to-close", { pieces: ["HTTP/1.0 401 Unauthorized\r\n\r\n", "no key"], close: true });
    expect([toClose.status, toClose.body.toString()]).toEqual([401, "no key"]);
  });

  it("skips an interim answer and takes the one that follows", async () => {
    const r = await get("/interim", {
      pieces: ["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"],
      close: false,
    });
    expect([r.status, r.body.toString()]).toEqual([201, "ok"]);
  });

  it("says 'socket hang up' when the server closes before the whole response", async () => {
    await expect(
      get("/short", { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"], close: true }),
    ).rejects.toMatchObject({ message: "socket hang up", code: "ECONNRESET" });
    await expect(
      get("/cut-chunk", { pieces: ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"], close: true }),
    ).rejects.toMatchObject({ message: "socket hang up" });
    await expect(get("/nothing", { pieces: [], close: true })).rejects.toMatchObject({ message: "socket hang up" });
  });

  it("refuses what is not an HTTP response, naming what it got", async () => {
    await expect(get("/ssh", { pieces: ["SSH-2.0-OpenSSH_9.2\r\n"], close: false })).rejects.toThrow(
      'malformed HTTP response: status line "SSH-2.0-OpenSSH_9.2"',
    );
    await expect(
      get("/two-lengths", {
        pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
        close: false,
      }),
    ).rejects.toThrow('malformed HTTP response: Content-Length "3"');
  });

  it("sends one request with its Host, Connection: close and the caller's headers; refuses a header that would split it", async () => {
    await get(
      "/sent?x=1",
      { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"], close: false },
      {
        Authorization: "Bearer k",
      },
    );
    const port = new URL(base).port;
    expect(received.at(-1)?.head).toBe(
      `GET /sent?x=1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\nAuthorization: Bearer k\r\n\r\n`,
    );
    const before = received.length;
    await expect(
      get("/split", { pieces: [], close: true }, { Authorization: "Bearer k\r\nX-Evil: 1" }),
    ).rejects.toMatchObject({ code: "ERR_INVALID_CHAR" });
    expect(received.length).toBe(before);
  });

  it("pipelines GETs on one connection, the last closing it, and reads each answer whatever ends it", async () => {
    scripts.set("/a", { pieces: ["HTTP/1.1 401 Unauthorized\r\nContent-Length: 4\r\n\r\nnope"], close: false });
    // A chunked answer whose last chunk shares a packet with the next answer's head.
    scripts.set("/b", {
      pieces: ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n", "0\r\n\r\nHTTP/1.1 20"],
      close: false,
    });
    scripts.set("/c", { pieces: ["0 OK\r\n\r\nto the close"], close: true });
    const before = connections;
    const answers = await httpGets(
      base,
      [{ path: "/a" }, { path: "/b", headers: { Authorization: "Bearer k" } }, { path: "/c" }],
      {
        timeoutMs: 3000,
      },
    );
    expect(answers.map((a) => [response(a).status, response(a).body.toString()])).toEqual([
      [401, "nope"],
      [200, "ok"],
      [200, "to the close"],
    ]);
    expect(connections - before).toBe(1);
    const heads = received.slice(-3).map((r) => r.head);
    expect(heads.map((h) => h.split("\r\n")[0])).toEqual(["GET /a HTTP/1.1", "GET /b HTTP/1.1", "GET /c HTTP/1.1"]);
    expect(heads.map((h) => h.includes("Connection: close"))).toEqual([false, false, true]);
    expect(heads[1]).toContain("Authorization: Bearer k");
  });

  it("sends again, on a new connection, what a server that closed after an answer left unanswered", async () => {
    scripts.set("/first", {
      pieces: ["HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n1"],
      close: true,
    });
    scripts.set("/second", { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2"], close: false });
    const before = connections;
    const answers = await httpGets(base, [{ path: "/first" }, { path: "/second" }], { timeoutMs: 3000 });
    expect(answers.map((a) => response(a).body.toString())).toEqual(["1", "2"]);
    expect(connections - before).toBe(2);
    expect(received.at(-1)).toMatchObject({ connection: before + 2 });
    expect(received.at(-1)?.head).toMatch(/^GET \/second HTTP\/1\.1\r\n/);
  });

  it("makes no connection for a signal already aborted (as when it was aborted while an earlier one was read), failing with its reason", async () => {
    const before = connections;
    const ac = new AbortController();
    const reason = new Error("the actor stopped");
    ac.abort(reason);
    const answers = await wireExchange(new URL(base), [{ method: "GET", path: "/a", headers: {} }], ac.signal);
    expect(answers).toEqual([reason]);
    // The next request's connection is the next one the server accepts: none was made in between.
    await get("/after", { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"], close: false });
    expect(received.at(-1)).toMatchObject({ connection: before + 1 });
  });

  it("sends again what a server left unanswered when it reset the connection after an answer", async () => {
    // A server that answers with Connection: close while pipelined requests are unread is reset by the kernel:
    // the whole first answer, then ECONNRESET.
    scripts.set("/reset-first", {
      pieces: ["HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n1"],
      close: "reset",
    });
    scripts.set("/reset-second", { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2"], close: false });
    const answers = await httpGets(base, [{ path: "/reset-first" }, { path: "/reset-second" }], { timeoutMs: 3000 });
    expect(answers.map((a) => response(a).body.toString())).toEqual(["1", "2"]);
  });

  it("gives each pipelined answer its deadline after the one before, and keeps what came when one is missed", async () => {
    // Three answers 150 ms apart: 450 ms in all, each within 300 ms of the one before.
    for (const p of ["/slow-1", "/slow-2", "/slow-3"])
      scripts.set(p, { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], close: false, delayMs: 150 });
    const slow = await httpGets(base, [{ path: "/slow-1" }, { path: "/slow-2" }, { path: "/slow-3" }], {
      timeoutMs: 300,
    });
    expect(slow.map((a) => response(a).status)).toEqual([200, 200, 200]);
    // The second is not answered in time (nor, so, the third: answers come in order): the first answer
    // stands, the rest fail with the deadline's TimeoutError.
    scripts.set("/never", { pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"], close: false, delayMs: 1500 });
    const missed = await httpGets(base, [{ path: "/slow-1" }, { path: "/never" }, { path: "/slow-3" }], {
      timeoutMs: 300,
    });
    expect(response(missed[0]).status).toBe(200);
    expect(missed.slice(1).map((a) => (a instanceof Error ? a.name : "a response"))).toEqual([
      "TimeoutError",
      "TimeoutError",
    ]);
  });

  it("refuses a chunk that is not the size it says, a header name that is no token, a value with NUL", async () => {
    await expect(
      get("/bad-chunk", {
        pieces: ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokay\r\n0\r\n\r\n"],
        close: false,
      }),
    ).rejects.toThrow("malformed HTTP response: chunk longer than its size");
    await expect(get("/x", { pieces: [], close: true }, { "Bad Name": "v" })).rejects.toMatchObject({
      code: "ERR_INVALID_HTTP_TOKEN",
    });
    await expect(get("/x", { pieces: [], close: true }, { Authorization: "a\u0000b" })).rejects.toMatchObject({
      code: "ERR_INVALID_CHAR",
    });
  });
});
