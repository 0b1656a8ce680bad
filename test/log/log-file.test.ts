// narwhal.log on disk: appended to (never truncated) by every logger that opens
// it, 0600, rotated by size keeping a fixed number of old files, and every line
// whole and in order across the rotation.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createLogger } from "../../src/log.js";

const fresh = () => fs.mkdtemp(path.join(os.tmpdir(), "narwhal-logfile-"));
const lines = async (file: string) =>
  (await fs.readFile(file, "utf8"))
    .trimEnd()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { message: string });

describe("narwhal.log", () => {
  it("appends to what an earlier run wrote and narrows a wider mode to 0600", async () => {
    const dir = await fresh();
    const file = path.join(dir, "narwhal.log");
    await fs.writeFile(file, `${JSON.stringify({ message: "from the previous controller" })}\n`, { mode: 0o644 });
    const log = createLogger({ level: "info", console: false });
    log.recordTo(dir);
    log.info("from this controller");
    await log.close();
    expect((await lines(file)).map((l) => l.message)).toEqual(["from the previous controller", "from this controller"]);
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
  });

  it("writes nothing to the state directory until recordTo", async () => {
    const dir = await fresh();
    const log = createLogger({ level: "info", console: false });
    log.info("console only");
    await log.close();
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it("rotates by size, keeps `keep` old files of at most maxBytes, and loses no line of the newest ones", async () => {
    const dir = await fresh();
    const log = createLogger({ level: "info", console: false, stateDir: dir, rotation: { maxBytes: 1000, keep: 2 } });
    for (let i = 0; i < 200; i++) log.info(`line ${String(i).padStart(3, "0")}`);
    await log.close();
    expect((await fs.readdir(dir)).sort()).toEqual(["narwhal.log", "narwhal.log.1", "narwhal.log.2"]);
    const files = ["narwhal.log.2", "narwhal.log.1", "narwhal.log"].map((f) => path.join(dir, f));
    const kept: string[] = [];
    for (const f of files) {
      const st = await fs.stat(f);
      expect(st.size, f).toBeLessThanOrEqual(1000);
      expect(st.mode & 0o777, f).toBe(0o600);
      kept.push(...(await lines(f)).map((l) => l.message));
    }
    // Oldest file first: the kept lines are the last ones logged, contiguous and in order.
    const last = Number(kept.at(-1)!.slice(5));
    expect(last).toBe(199);
    expect(kept).toEqual(
      Array.from({ length: kept.length }, (_, i) => `line ${String(last - kept.length + 1 + i).padStart(3, "0")}`),
    );
    expect(kept.length).toBeGreaterThan(20);
  });

  it("refuses a narwhal.log that is a FIFO or a symlink, naming the path, without hanging", async () => {
    const dir = await fresh();
    const file = path.join(dir, "narwhal.log");
    await fs.symlink("/dev/null", file);
    const log = createLogger({ level: "info", console: false });
    expect(() => log.recordTo(dir)).toThrow(new RegExp(`cannot open ${file}: ELOOP`));
    await fs.rm(file);
    const { execFileSync } = await import("node:child_process");
    execFileSync("mkfifo", [file]);
    expect(() => log.recordTo(dir)).toThrow(new RegExp(`cannot open ${file}: ENXIO`));
    await log.close();
  });
});
