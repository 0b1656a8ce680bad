// Secrets registered with the logger never reach its JSON-lines file, in the
// message, in metadata, or under a key that names a secret.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { createLogger, redactText } from "../../src/log.js";

describe("logger redaction", () => {
  it("replaces registered secrets and secret-named fields in the file transport", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-log-"));
    const log = createLogger({ level: "debug", stateDir: dir, console: false });
    log.addSecrets(["canary-key-4242"]);
    log.child({ engine: "engine-1" }).info("starting with canary-key-4242 in the message", {
      env: { VLLM_API_KEY: "canary-key-4242", other: "x canary-key-4242 y" },
      api_key: "anything",
    });
    await log.close();
    const text = await fs.readFile(path.join(dir, "narwhal.log"), "utf8");
    expect(text).toContain("starting with <redacted> in the message");
    expect(text).not.toContain("canary-key-4242");
    expect(JSON.parse(text.trim().split("\n")[0]!)).toMatchObject({
      engine: "engine-1",
      api_key: "<redacted>",
      env: { other: "x <redacted> y" },
    });
    expect((await fs.stat(path.join(dir, "narwhal.log"))).mode & 0o777).toBe(0o600);
  });

  it("debug lines reach the transports at level debug, through a child too, and none below it", async () => {
    const stamps: string[] = [];
    const hhmmss = (t: Date) => t.toTimeString().slice(0, 8);
    const lines = async (level: string) => {
      const from = Date.now();
      const out = new PassThrough();
      const chunks: string[] = [];
      out.on("data", (c: Buffer) => chunks.push(c.toString()));
      const log = createLogger({ level, consoleStream: out });
      log.debug("root debug line");
      log.child({ engine: "engine-1" }).debug("child debug line");
      log.info("info line");
      await log.close();
      for (let t = from - (from % 1000); t <= Date.now(); t += 1000) stamps.push(hhmmss(new Date(t)));
      return chunks.join("");
    };
    const debug = await lines("debug");
    expect(debug).toContain("root debug line");
    expect(debug).toContain("[engine-1] child debug line");
    const info = await lines("info");
    expect(info).toContain("info line");
    // A console line: the local time (HH:mm:ss) of one second while it was written, the level padded to five, the message.
    expect(info).toMatch(/^\d{2}:\d{2}:\d{2} info  info line\n$/);
    expect(stamps).toContain(info.slice(0, 8));
    expect(info).not.toContain("debug line");
  });

  it("redactText ignores values too short to be keys", () => {
    expect(redactText("a b c", ["b"])).toBe("a b c");
    expect(redactText("key=sekret1 and sekret1", ["sekret1"])).toBe("key=<redacted> and <redacted>");
  });
});
