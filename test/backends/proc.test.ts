// Process identity from /proc/<pid>/stat: the comm field may hold spaces and
// parentheses, so fields are counted from the last ")".
import { readFile } from "node:fs/promises";
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseProcStat, readBootId, readProcStat } from "../../src/backends/proc.js";
import { isSameProcessOn } from "../../src/backends/native-host.js";
import { LocalHost } from "../../src/hosts/local.js";

const local = new LocalHost("local", {});

/** A /proc/<pid>/stat line: pid, (comm), then fields 3..52 with field 22 = startTicks. */
function statLine(
  pid: number,
  comm: string,
  fields: { state?: string; ppid?: number; pgid?: number; startTicks?: number } = {},
): string {
  const rest = Array.from({ length: 50 }, (_, i) => String(1000 + i + 3)); // rest[i] is field i+3
  rest[0] = fields.state ?? "S";
  rest[1] = String(fields.ppid ?? 1);
  rest[2] = String(fields.pgid ?? pid);
  rest[19] = String(fields.startTicks ?? 987654);
  return `${pid} (${comm}) ${rest.join(" ")}\n`;
}

describe("parseProcStat", () => {
  it("reads pid, state, pgid and start ticks (field 22)", () => {
    expect(parseProcStat(statLine(1234, "python3", { state: "R", pgid: 1200, startTicks: 555 }))).toEqual({
      pid: 1234,
      state: "R",
      pgid: 1200,
      startTicks: 555,
    });
  });

  it("survives a comm with spaces and parentheses", () => {
    const line = statLine(1234, "my (weird) proc", { state: "S", pgid: 1234, startTicks: 424242 });
    expect(line.startsWith("1234 (my (weird) proc) S 1 1234 ")).toBe(true);
    expect(parseProcStat(line)).toEqual({ pid: 1234, state: "S", pgid: 1234, startTicks: 424242 });
  });

  it("survives a comm that ends in ') ' and digits", () => {
    const line = statLine(77, ") 9 9 9 (", { state: "Z", pgid: 70, startTicks: 31337 });
    expect(parseProcStat(line)).toEqual({ pid: 77, state: "Z", pgid: 70, startTicks: 31337 });
  });

  it("agrees with the kernel for this very process", async () => {
    const text = await readFile(`/proc/${process.pid}/stat`, "utf8");
    const stat = parseProcStat(text);
    expect(stat.pid).toBe(process.pid);
    expect(stat.pgid).toBe(Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[2]));
    expect(Number.isInteger(stat.startTicks) && stat.startTicks > 0).toBe(true);
  });
});

describe("isSameProcessOn (the local host)", () => {
  it("is true for this process with its own start ticks, false for a wrong tick", async () => {
    const own = await readProcStat(process.pid);
    expect(own).not.toBeNull();
    expect(await isSameProcessOn(local, process.pid, own!.startTicks)).toBe(true);
    expect(await isSameProcessOn(local, process.pid, own!.startTicks + 1)).toBe(false);
  });

  it("is false for a pid that has exited", async () => {
    const child = spawnSync(process.execPath, ["-e", "0"]);
    expect(await readProcStat(child.pid!)).toBeNull();
    expect(await isSameProcessOn(local, child.pid!, 1)).toBe(false);
  });
});

describe("boot id", () => {
  it("reads the boot id", async () => {
    expect(await readBootId()).toMatch(/^[0-9a-f-]{36}$/);
  });
});
