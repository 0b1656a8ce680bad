// LocalHost's scan of group leaders on a busy machine: one helper python reads them (the scan an SshHost
// runs), and finds what the scan in process finds; a helper that fails leaves it to the process, one that
// hangs is an error. Real processes, a real python3; the interpreter is a wrapper that says it ran.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import type { HelperPythonMemo } from "../../src/hosts/stdlib-python.js";
import type { LeaderScan } from "../../src/hosts/types.js";
import { sleepingLeaders, until } from "./contract.js";

const PATH = "/usr/local/bin:/usr/bin:/bin";
const NAMES = ["NARWHAL_LAUNCH_TOKEN", "NARWHAL_NOT_SET"];
let dir = "";
const inProcess = new LocalHost("scan-test", { PATH }, { scriptScanFrom: Number.POSITIVE_INFINITY });
const made: LocalHost[] = [inProcess];

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-local-scan-"));
});
afterAll(async () => {
  for (const h of made) await h.close();
  await fs.rm(dir, { recursive: true, force: true });
});

/** A helper interpreter that appends a line to `<name>.ran` and then runs `body` (sh) with the helper's arguments. */
async function interpreter(
  name: string,
  body: string,
): Promise<{ memo: HelperPythonMemo; runs: () => Promise<number> }> {
  const exe = path.join(dir, name);
  const ran = `${exe}.ran`;
  await fs.writeFile(exe, `#!/bin/sh\necho ran >> '${ran}'\n${body}\n`, { mode: 0o755 });
  return {
    memo: { read: async () => exe, write: async () => undefined },
    runs: async () => (await fs.readFile(ran, "utf8").catch(() => "")).split("\n").filter(Boolean).length,
  };
}

/** A host that scans by its helper on any machine (from 0 /proc entries). */
function scriptHost(memo: HelperPythonMemo, scriptScanTimeoutMs?: number): LocalHost {
  const h = new LocalHost(
    "scan-test",
    { PATH },
    {
      helperPythonMemo: memo,
      scriptScanFrom: 0,
      ...(scriptScanTimeoutMs ? { scriptScanTimeoutMs } : {}),
    },
  );
  made.push(h);
  return h;
}

/** Two session leaders running sleep, one with a token in its environment (sleepingLeaders); `use` them, then end them. */
async function withLeaders(use: (tagged: number, plain: number, token: string) => Promise<void>): Promise<void> {
  const token = `token-${process.pid}-${Date.now()}`;
  const { tagged, plain } = await sleepingLeaders(inProcess, dir, token);
  try {
    await use(tagged, plain, token);
  } finally {
    for (const pid of [tagged, plain]) await inProcess.run(["kill", "--", `-${pid}`]);
  }
}

/** What a scan says of these pids: their identity as leaders, the names found, the cwd. */
const about = (scan: LeaderScan, pids: number[]) =>
  pids.map((pid) => {
    const p = scan.leaders.find((l) => l.pid === pid);
    return { pid, leader: p && [p.pgid, p.startTicks], env: scan.envs.get(pid), cwd: scan.cwds.get(pid) };
  });

describe("LocalHost scanning group leaders by its helper python", () => {
  it("finds what the scan in process finds: the boot id, the leaders, the names asked for, the cwd", async () => {
    const py = await interpreter("py-ok", 'exec python3 "$@"');
    const host = scriptHost(py.memo);
    await withLeaders(async (tagged, plain, token) => {
      const [byScript, here] = [await host.scanLeaders(NAMES), await inProcess.scanLeaders(NAMES)];
      expect(await py.runs()).toBe(1);
      expect(byScript.bootId).toBe(await inProcess.bootId());
      expect(about(byScript, [tagged, plain])).toEqual(about(here, [tagged, plain]));
      expect(byScript.envs.get(tagged)).toEqual({ NARWHAL_LAUNCH_TOKEN: token });
      expect(byScript.envs.get(plain)).toEqual({});
      expect(byScript.cwds.get(tagged)).toBe(await fs.realpath(dir));
      expect(byScript.leaders.every((p) => p.pgid === p.pid && p.state !== "Z")).toBe(true);
    });
  });

  it("leaves the scan to the process when its helper fails", async () => {
    const py = await interpreter("py-fails", "echo broken >&2; exit 3");
    const host = scriptHost(py.memo);
    await withLeaders(async (tagged, _plain, token) => {
      const scan = await host.scanLeaders(NAMES);
      expect(await py.runs()).toBe(1);
      expect(scan.envs.get(tagged)).toEqual({ NARWHAL_LAUNCH_TOKEN: token });
    });
  });

  it("fails, naming the node and the fix, when its helper outlasts the deadline", async () => {
    const py = await interpreter("py-hangs", "exec sleep 30");
    const host = scriptHost(py.memo, 300);
    const err = await host.scanLeaders(NAMES).catch((e: unknown) => e);
    expect(err).toMatchObject({
      retryable: true,
      input: "node scan-test",
      message: expect.stringMatching(/^node scan-test: scanning its process group leaders took more than 0.3 s/),
      fix: expect.stringContaining("state D"),
    });
    expect(await py.runs()).toBe(1);
  });

  // A scan that listed /proc before a leader started cannot say it is not there: a start asking whether its
  // launch token runs would start a second engine. So a request made during a scan waits for the next one.
  it("answers a request made while a scan runs by one begun after it: a leader started meanwhile is seen", async () => {
    const listed = path.join(dir, "py-slow.listed");
    const py = await interpreter("py-slow", `python3 "$@"; echo listed >> '${listed}'; sleep 0.5`);
    const host = scriptHost(py.memo);
    const first = host.scanLeaders(NAMES);
    await until("the first scan to have listed", async () => (await fs.stat(listed).catch(() => null)) !== null);
    await withLeaders(async (tagged, _plain, token) => {
      const second = await host.scanLeaders(NAMES);
      expect((await first).envs.has(tagged)).toBe(false);
      expect(second.envs.get(tagged)).toEqual({ NARWHAL_LAUNCH_TOKEN: token });
      expect(await py.runs()).toBe(2);
    });
  });

  it("shares the machine's scans among its node records: those asked during one scan make one more", async () => {
    const listed = path.join(dir, "py-shared.listed");
    const py = await interpreter("py-shared", `python3 "$@"; echo listed >> '${listed}'; sleep 0.3`);
    const host = scriptHost(py.memo);
    const other = new LocalHost("scan-test-2", { PATH }, { leaderScans: host.leaderScans });
    made.push(other);
    await withLeaders(async (tagged, _plain, token) => {
      const first = host.scanLeaders(NAMES);
      await until("the first scan to have listed", async () => (await fs.stat(listed).catch(() => null)) !== null);
      const during = [host, other, host, other].map((h) => h.scanLeaders(["NARWHAL_LAUNCH_TOKEN"]));
      for (const scan of [await first, ...(await Promise.all(during))])
        expect(scan.envs.get(tagged)).toEqual({ NARWHAL_LAUNCH_TOKEN: token });
      expect(await py.runs()).toBe(2);
    });
    // A shared scan past its deadline is the error of the node record that asked.
    const hung = await interpreter("py-hangs-shared", "exec sleep 30");
    const slow = scriptHost(hung.memo, 300);
    const sharing = new LocalHost("scan-test-3", { PATH }, { leaderScans: slow.leaderScans });
    made.push(sharing);
    await expect(sharing.scanLeaders(NAMES)).rejects.toMatchObject({ input: "node scan-test-3", retryable: true });
  });
});
