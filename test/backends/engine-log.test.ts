// An engine's log is read bounded (item 15 of issue 8): whole when it fits the
// cap, else its first lines, a marker and its tail, and never held whole. The
// Docker frame demuxer must cope with frames split across chunks.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { FrameDemux, LogTail, readLogFile, readLogTail, readNodeLog } from "../../src/backends/engine-log.js";
import { LocalHost } from "../../src/hosts/local.js";

const lines = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => `line ${from + i} ${"x".repeat(40)}\n`).join("");

/** Docker's multiplexed framing: [stream, 0, 0, 0, size(4 bytes BE)] + payload. */
function frame(stream: 1 | 2, text: string): Buffer {
  const payload = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
}

describe("LogTail", () => {
  it("keeps a log that fits the cap whole", () => {
    const sink = new LogTail(64 * 1024);
    const text = lines(0, 100);
    for (let i = 0; i < text.length; i += 333) sink.push(Buffer.from(text.slice(i, i + 333)));
    expect(sink.text()).toBe(text);
  });

  it("keeps whole first lines, a marker and whole last lines within the cap", () => {
    const cap = 16 * 1024;
    const sink = new LogTail(cap);
    const text = lines(0, 50_000); // ~2.4 MiB
    for (let i = 0; i < text.length; i += 4096) sink.push(Buffer.from(text.slice(i, i + 4096)));
    const kept = sink.bytes();
    expect(kept.length).toBeLessThanOrEqual(cap);
    expect(kept.length).toBeGreaterThan(cap / 2);
    const out = kept.toString();
    expect(out.startsWith("line 0 ")).toBe(true);
    expect(out.endsWith(`line 49999 ${"x".repeat(40)}\n`)).toBe(true);
    expect(out).toMatch(
      /\[narwhal: \d+ bytes of this \d+-byte log omitted; the cap is 16384 bytes \(NARWHAL_ENGINE_LOG_CAP_BYTES\)\]/,
    );
    // Every kept line is whole.
    for (const l of out.split("\n").filter((l) => l.startsWith("line "))) expect(l).toMatch(/^line \d+ x{40}$/);
    expect(sink.total).toBe(Buffer.byteLength(text));
  });
});

describe("FrameDemux", () => {
  it("joins stdout and stderr frames split at any byte", () => {
    const stream = Buffer.concat([frame(1, "hello "), frame(2, "from stderr\n"), frame(1, lines(0, 20))]);
    for (const step of [1, 3, 7, 8, 9, 100]) {
      const demux = new FrameDemux();
      const parts: Buffer[] = [];
      for (let i = 0; i < stream.length; i += step) parts.push(...demux.push(stream.subarray(i, i + step)));
      expect(Buffer.concat(parts).toString()).toBe(`hello from stderr\n${lines(0, 20)}`);
    }
  });

  it("passes a TTY container's unframed log through", () => {
    const demux = new FrameDemux();
    expect(
      Buffer.concat([...demux.push(Buffer.from("plain text\n")), ...demux.push(Buffer.from("more\n"))]).toString(),
    ).toBe("plain text\nmore\n");
  });
});

describe("readLogFile", () => {
  it("reads a large engine.log's head and tail only, within the cap", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-log-"));
    const file = path.join(dir, "engine.log");
    await fs.writeFile(file, lines(0, 100_000)); // ~4.8 MiB
    const log = await readLogFile(file, 32 * 1024);
    expect(log.problem).toBeUndefined();
    expect(log.where).toBe(file);
    expect(Buffer.byteLength(log.text)).toBeLessThanOrEqual(32 * 1024);
    expect(log.text.startsWith("line 0 ")).toBe(true);
    expect(log.text.endsWith(`line 99999 ${"x".repeat(40)}\n`)).toBe(true);
    await fs.rm(dir, { recursive: true });
  });

  it("names a missing engine.log instead of throwing", async () => {
    const log = await readLogFile("/nonexistent/engine.log", 1024);
    expect(log.text).toBe("");
    expect(log.problem).toMatch(/\/nonexistent\/engine\.log could not be read: ENOENT/);
  });
});

describe("readNodeLog (a log on the engine's node, read through its host access)", () => {
  it("takes the same head and tail as a local read, and keeps the bounded copy as evidence", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-log-"));
    const file = path.join(dir, "node", "engine.log");
    const evidence = path.join(dir, "run");
    await fs.mkdir(path.dirname(file));
    await fs.mkdir(evidence);
    await fs.writeFile(file, lines(0, 100_000));
    const host = new LocalHost("gpu-a", { PATH: "/usr/bin:/bin" });
    const log = await readNodeLog(host, file, 32 * 1024, evidence);
    expect(log.problem).toBeUndefined();
    expect(log.text).toBe((await readLogFile(file, 32 * 1024)).text);
    expect(log.where).toBe(path.join(evidence, "engine.log"));
    expect(await fs.readFile(log.where, "utf8")).toBe(log.text);
    expect((await fs.stat(log.where)).mode & 0o777).toBe(0o600);
    await fs.rm(dir, { recursive: true });
  });

  it("names the node and the file it could not read, and copies nothing", async () => {
    const evidence = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-log-"));
    const log = await readNodeLog(new LocalHost("gpu-a", {}), "/nonexistent/engine.log", 1024, evidence);
    expect(log).toMatchObject({ text: "", where: "/nonexistent/engine.log on node gpu-a" });
    expect(log.problem).toContain("/nonexistent/engine.log on node gpu-a could not be read");
    expect(await fs.readdir(evidence)).toEqual([]);
    await fs.rm(evidence, { recursive: true });
  });
});

describe("readLogTail (the last lines of a log, for a lost engine's reason)", () => {
  it("reads only the end, from its first whole line, the same here and through a node's host access", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-log-"));
    const file = path.join(dir, "engine.log");
    await fs.writeFile(file, lines(0, 100_000)); // ~4.8 MiB
    const local = await readLogTail(null, file, 1000);
    expect(local.problem).toBeUndefined();
    expect(local.where).toBe(file);
    expect(Buffer.byteLength(local.text)).toBeLessThanOrEqual(1000);
    // 1000 bytes hold 19 whole lines of 52 bytes and a cut one, which is dropped.
    expect(local.text).toBe(lines(99_981, 100_000));
    const remote = await readLogTail(new LocalHost("gpu-a", { PATH: "/usr/bin:/bin" }), file, 1000);
    expect(remote).toEqual({ text: local.text, where: `${file} on node gpu-a` });
    await fs.writeFile(file, lines(0, 3));
    expect((await readLogTail(null, file, 1000)).text).toBe(lines(0, 3));
    // The cut is found in bytes: a first line cut inside a two-byte character is dropped too.
    const wide = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => `é step ${from + i}\n`).join("");
    await fs.writeFile(file, wide(0, 100));
    expect((await readLogTail(null, file, 32)).text).toBe(wide(98, 100));
    await fs.rm(dir, { recursive: true });
  });

  it("names a log it could not read instead of throwing", async () => {
    const log = await readLogTail(null, "/nonexistent/engine.log", 1024);
    expect(log.text).toBe("");
    expect(log.problem).toMatch(/\/nonexistent\/engine\.log could not be read: ENOENT/);
  });
});
