// The HostAccess contract: one test body every implementation must pass, run
// against LocalHost (test/hosts/local.test.ts) and SshHost over a real sshd
// (test/e2e/hosts-ssh.test.ts). Each case acts through the host under test and
// checks through it too, so it holds for a node that is another machine.
import fs from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CancelledError, IoError } from "../../src/errors.js";
import type { HostAccess } from "../../src/hosts/types.js";
import { runHelper } from "../../src/hosts/stdlib-python.js";

export interface ContractFixture {
  host: HostAccess;
  /** A fresh directory on the node, private to this test file. */
  dir: string;
  /** Start a TCP listener on the node; returns its port and how to stop it. */
  listen(): Promise<{ port: number; stop(): Promise<void> }>;
}

/** True while pid runs on the node (and is not a zombie), asked through the host itself. */
async function running(host: HostAccess, pid: number): Promise<boolean> {
  return (await host.listProcesses()).some((p) => p.pid === pid && p.state !== "Z");
}

/** Wait for a condition the node reports (a file appearing), never a fixed sleep. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Two session leaders running sleep in `dir`, one with NARWHAL_LAUNCH_TOKEN=token in its environment: their
 * pids, once both have exec'd sleep. The caller ends them (kill -- -pid); a wait that fails ends them itself.
 */
export async function sleepingLeaders(
  host: HostAccess,
  dir: string,
  token: string,
): Promise<{ tagged: number; plain: number }> {
  const spawn = (env: Record<string, string>, name: string) =>
    host.spawnDetached(["sh", "-c", "exec sleep 300"], { env, cwd: dir, logFile: `${dir}/${name}.log` });
  const { pid: tagged } = await spawn({ NARWHAL_LAUNCH_TOKEN: token }, "tagged");
  const { pid: plain } = await spawn({}, "plain");
  try {
    await until("both to exec sleep", async () =>
      (await Promise.all([tagged, plain].map((p) => host.processEnvToken(p, "NARWHAL_LAUNCH_TOKEN")))).includes(token),
    );
  } catch (err) {
    // Not handed to the caller yet: ended here, as the caller's finally would.
    for (const pid of [tagged, plain]) await host.run(["kill", "--", `-${pid}`]);
    throw err;
  }
  return { tagged, plain };
}

export function hostAccessContract(name: string, setup: () => ContractFixture): void {
  describe(`HostAccess contract: ${name}`, () => {
    it("runs argv exactly, with no shell between: spaces, quotes, $, globs and newlines arrive as they were", async () => {
      const { host } = setup();
      const args = ["a b", "it's", '"q"', "$HOME", "*", "line\nbreak", "", "-n", "\\"];
      const r = await host.run(["printf", "%s\\0", ...args]);
      expect(r.code).toBe(0);
      expect(r.stdout.split("\0").slice(0, -1)).toEqual(args);
    });

    it("returns a command's own failure as its exit code, 255 included, with stdout and stderr", async () => {
      const { host } = setup();
      const r = await host.run(["sh", "-c", "echo out; echo err >&2; exit 255"]);
      expect(r).toMatchObject({ code: 255, signal: null, stdout: "out\n", stderr: "err\n", timedOut: false });
      expect((await host.run(["sh", "-c", "exit 3"])).code).toBe(3);
    });

    it("says 127 for a command that does not exist, as a shell does", async () => {
      const { host } = setup();
      expect((await host.run([`no-such-tool-${randomUUID()}`])).code).toBe(127);
    });

    it("feeds stdin, adds env variables and runs in cwd", async () => {
      const { host, dir } = setup();
      const r = await host.run(["sh", "-c", 'cat; printf "%s|%s" "$NARWHAL_T" "$(pwd)"'], {
        stdin: "from stdin\n",
        env: { NARWHAL_T: "x 'y' $z" },
        cwd: dir,
      });
      expect(r.stdout).toBe(`from stdin\nx 'y' $z|${await fs.realpath(dir).catch(() => dir)}`);
    });

    it("never puts an env value in a command line, on the node or on the controller (API keys travel so)", async () => {
      const { host, dir } = setup();
      const secret = `secret-${randomUUID()}`;
      // Every process's argv while the command runs (for SSH: the client's too, when /proc is shared).
      const r = await host.run(
        [
          "sh",
          "-c",
          'printf %s "$NARWHAL_SECRET" > "$1/pattern"; grep -lF -f "$1/pattern" /proc/[0-9]*/cmdline; true',
          "sh",
          dir,
        ],
        { env: { NARWHAL_SECRET: secret } },
      );
      expect(r.code).toBe(0);
      expect(r.stdout.split("\n").filter((l) => l && !l.startsWith("/proc/self/"))).toEqual([]);
      expect((await host.readFile(`${dir}/pattern`)).toString()).toBe(secret);
    });

    it("refuses a cwd that does not exist with an IoError naming it", async () => {
      const { host, dir } = setup();
      const missing = `${dir}/missing-cwd`;
      const err: unknown = await host.run(["true"], { cwd: missing }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IoError);
      expect(err).toMatchObject({ code: "ENOENT", path: missing });
    });

    it("ends a command at its deadline, on the node, and says it timed out", async () => {
      const { host, dir } = setup();
      const pidFile = `${dir}/deadline.pid`;
      const begun = Date.now();
      const r = await host.run(["sh", "-c", `echo $$ > ${pidFile}; exec sleep 60`], { timeoutMs: 1_000 });
      expect(r).toMatchObject({ code: null, timedOut: true });
      // Well before the sleep would end by itself: the deadline ended it.
      expect(Date.now() - begun).toBeLessThan(20_000);
      const pid = Number((await host.readFile(pidFile)).toString());
      await until(`pid ${pid} to end`, async () => !(await running(host, pid)));
    });

    it("ends a command on abort, on the node, and rejects with CancelledError", async () => {
      const { host, dir } = setup();
      const pidFile = `${dir}/abort.pid`;
      const ac = new AbortController();
      const done = host.run(["sh", "-c", `echo $$ > ${pidFile}; exec sleep 60`], { signal: ac.signal });
      await until(
        "the command to start",
        async () => (await host.stat(pidFile))?.size !== 0 && !!(await host.stat(pidFile)),
      );
      const aborted = Date.now();
      ac.abort();
      await expect(done).rejects.toBeInstanceOf(CancelledError);
      expect(Date.now() - aborted).toBeLessThan(20_000);
      const pid = Number((await host.readFile(pidFile)).toString());
      await until(`pid ${pid} to end`, async () => !(await running(host, pid)));
    });

    it("writes a file atomically with its mode, creating parent directories 0700, and reads the bytes back", async () => {
      const { host, dir } = setup();
      const file = `${dir}/new/deeper/plan.bin`;
      const bytes = Buffer.from([0, 1, 2, 255, 10, 13, 0x27, 0x22]);
      await host.writeFile(file, bytes, 0o400);
      expect(await host.readFile(file)).toEqual(bytes);
      expect(await host.stat(file)).toMatchObject({ kind: "file", size: bytes.length, mode: 0o400 });
      expect(await host.stat(`${dir}/new`)).toMatchObject({ kind: "dir", mode: 0o700 });
      await host.writeFile(file, "second\n", 0o600);
      expect((await host.readFile(file)).toString()).toBe("second\n");
      // Nothing but the file: no temp left behind beside it.
      expect(await host.readDir(`${dir}/new/deeper`)).toEqual(["plan.bin"]);
    });

    it("places files in one call: absent ones written with their modes, the same bytes left, other bytes reported and left", async () => {
      const { host, dir } = setup();
      await host.writeFile(`${dir}/place/same`, "same bytes", 0o600);
      await host.writeFile(`${dir}/place/other`, "what was there", 0o600);
      const files = [
        { path: `${dir}/place/new/plan.json`, data: Buffer.from('{"plan": 1}\n'), mode: 0o400 },
        { path: `${dir}/place/same`, data: Buffer.from("same bytes"), mode: 0o600 },
        { path: `${dir}/place/other`, data: Buffer.from("what was there, and more"), mode: 0o600 },
        { path: `${dir}/place/empty`, data: Buffer.alloc(0), mode: 0o600 },
      ];
      expect(await host.ensureFiles(files)).toEqual(["written", "same", "other", "written"]);
      expect((await host.readFile(`${dir}/place/new/plan.json`)).toString()).toBe('{"plan": 1}\n');
      expect(await host.stat(`${dir}/place/new/plan.json`)).toMatchObject({ mode: 0o400 });
      expect((await host.readFile(`${dir}/place/other`)).toString()).toBe("what was there");
      // Again: everything is there now, as it must be, or still reported.
      expect(await host.ensureFiles(files)).toEqual(["same", "same", "other", "same"]);
      expect(await host.ensureFiles([])).toEqual([]);
      // One that cannot be placed (its parent is a file): an IoError naming it or the parent in its way.
      const err: unknown = await host
        .ensureFiles([{ path: `${dir}/place/same/under-a-file`, data: Buffer.from("x"), mode: 0o600 }])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IoError);
      expect((err as IoError).path).toMatch(new RegExp(`^${dir}/place/same(/under-a-file)?$`));
      expect(["ENOTDIR", "EEXIST"]).toContain((err as IoError).code);
    });

    it("reads a missing file as IoError ENOENT, and one past maxBytes as EFBIG", async () => {
      const { host, dir } = setup();
      await expect(host.readFile(`${dir}/absent`)).rejects.toMatchObject({ code: "ENOENT", path: `${dir}/absent` });
      await host.writeFile(`${dir}/big`, "x".repeat(100), 0o600);
      expect((await host.readFile(`${dir}/big`, { maxBytes: 100 })).length).toBe(100);
      await expect(host.readFile(`${dir}/big`, { maxBytes: 99 })).rejects.toMatchObject({ code: "EFBIG" });
    });

    it("stats files, directories and devices (symlinks followed), and null for nothing", async () => {
      const { host, dir } = setup();
      await host.writeFile(`${dir}/s/f`, "abc", 0o644);
      await host.run(["ln", "-s", `${dir}/s/f`, `${dir}/s/link`]);
      const st = await host.stat(`${dir}/s/f`);
      expect(st).toMatchObject({ kind: "file", size: 3, mode: 0o644 });
      expect(st!.ino).toBeGreaterThan(0);
      expect(Math.abs(st!.mtimeMs - Date.now())).toBeLessThan(60_000);
      expect(await host.stat(`${dir}/s/link`)).toEqual(st);
      expect(await host.stat(`${dir}/s`)).toMatchObject({ kind: "dir" });
      expect(await host.stat("/dev/null")).toMatchObject({ kind: "other" });
      expect(await host.stat(`${dir}/s/none`)).toBeNull();
      expect(await host.stat(`${dir}/s/f/under-a-file`)).toBeNull();
    });

    it("reads a symlink's target (a process's cwd too); null for a file, nothing, or a gone process", async () => {
      const { host, dir } = setup();
      await host.writeFile(`${dir}/rl/f`, "abc", 0o600);
      await host.run(["ln", "-s", `${dir}/rl/f`, `${dir}/rl/link`]);
      expect(await host.readLink(`${dir}/rl/link`)).toBe(`${dir}/rl/f`);
      expect(await host.readLink(`${dir}/rl/f`)).toBeNull();
      expect(await host.readLink(`${dir}/rl/none`)).toBeNull();
      const { pid } = await host.spawnDetached(["sleep", "30"], { cwd: `${dir}/rl`, logFile: `${dir}/rl.log` });
      try {
        expect(await host.readLink(`/proc/${pid}/cwd`)).toBe(`${dir}/rl`);
      } finally {
        // "--" before the group, always: procps-ng 4's kill(1) reads "-9 -192" as "-1" and sends SIGKILL to
        // every process on the machine (a group id starting with 1; strace showed kill(-1, SIGKILL)).
        await host.run(["kill", "-s", "KILL", "--", `-${pid}`]);
      }
      expect(await host.readLink("/proc/999999999/cwd")).toBeNull();
    });

    it("lists a directory sorted, dotfiles and odd names included; null when missing", async () => {
      const { host, dir } = setup();
      for (const n of ["b", ".hidden", "a b", "new\nline"]) await host.writeFile(`${dir}/ls/${n}`, "", 0o600);
      expect(await host.readDir(`${dir}/ls`)).toEqual([".hidden", "a b", "b", "new\nline"].sort());
      expect(await host.readDir(`${dir}/ls-missing`)).toBeNull();
    });

    it("lists processes with group, start ticks and argv, and reads one variable of a process's environment", async () => {
      const { host, dir } = setup();
      const token = randomUUID();
      const pidFile = `${dir}/proc.pid`;
      // A detached group leader carrying a token, like a native engine.
      const started = await host.run([
        "sh",
        "-c",
        `NARWHAL_LAUNCH_TOKEN=${token} setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ${pidFile}`,
      ]);
      expect(started.code).toBe(0);
      const pid = Number((await host.readFile(pidFile)).toString());
      try {
        // Until it leads its own group: between the shell's fork and setsid's exec of sleep it runs in the shell's
        // group with the shell's environment (listed so, this test failed once with a clean clone beside it).
        await until(
          "the process to lead its group, with its environment",
          async () =>
            (await host.listProcesses()).some((q) => q.pid === pid && q.pgid === pid && q.state !== "Z") &&
            (await host.processEnvToken(pid, "NARWHAL_LAUNCH_TOKEN")) === token,
        );
        const p = (await host.listProcesses()).find((q) => q.pid === pid)!;
        expect(p).toMatchObject({ pid, pgid: pid });
        expect(p.startTicks).toBeGreaterThan(0);
        expect(await host.processEnvToken(pid, "NARWHAL_LAUNCH_TOKEN")).toBe(token);
        expect(await host.processEnvToken(pid, "NARWHAL_NOT_SET")).toBeNull();
        // Many at once: only the names asked for, and nothing for a pid that is gone.
        const gone = 2 ** 22 + 1;
        const envs = await host.processEnvs([pid, gone], ["NARWHAL_LAUNCH_TOKEN", "NARWHAL_NOT_SET"]);
        expect([...envs]).toEqual([[pid, { NARWHAL_LAUNCH_TOKEN: token }]]);
        // More pids than the reads in flight (local.ts reads in lanes), the live one last: each one read.
        const more = await host.processEnvs([gone, gone + 2, gone + 4, gone + 6, pid], ["NARWHAL_LAUNCH_TOKEN"]);
        expect([...more]).toEqual([[pid, { NARWHAL_LAUNCH_TOKEN: token }]]);
        expect(await host.processEnvs([], ["PATH"])).toEqual(new Map());
      } finally {
        await host.run(["kill", String(pid)]);
      }
      expect(await host.processEnvToken(2 ** 22 + 1, "PATH")).toBeNull();
    });

    it("scans group leaders in one call: boot id, leaders, the names asked for, and the cwd of those that have one", async () => {
      const { host, dir } = setup();
      const token = randomUUID();
      const { tagged, plain } = await sleepingLeaders(host, dir, token);
      try {
        const scan = await host.scanLeaders(["NARWHAL_LAUNCH_TOKEN", "NARWHAL_NOT_SET"]);
        expect(scan.bootId).toBe(await host.bootId());
        const listed = await host.listProcesses();
        // The identity the two reads agree on; the run state (R while it still execs, S once sleep waits) may
        // move between them.
        const identity = (p: { pid: number; pgid: number; startTicks: number } | undefined) =>
          p && { pid: p.pid, pgid: p.pgid, startTicks: p.startTicks };
        for (const pid of [tagged, plain])
          expect(identity(scan.leaders.find((p) => p.pid === pid))).toEqual(
            identity(listed.find((p) => p.pid === pid)),
          );
        // Leaders only, no zombie: what the process table holds beside them is not listed.
        expect(scan.leaders.every((p) => p.pgid === p.pid && p.state !== "Z")).toBe(true);
        expect(scan.envs.get(tagged)).toEqual({ NARWHAL_LAUNCH_TOKEN: token });
        expect(scan.envs.get(plain)).toEqual({});
        const real = (await host.run(["readlink", "-f", dir])).stdout.trim();
        expect(scan.cwds.get(tagged)).toBe(real);
        expect(scan.cwds.has(plain)).toBe(false);
      } finally {
        for (const pid of [tagged, plain]) await host.run(["kill", "--", `-${pid}`]);
      }
    });

    it("starts a detached session leader that outlives the call, with env, cwd and its output appended to a log", async () => {
      const { host, dir } = setup();
      const token = randomUUID();
      const log = `${dir}/spawn/engine.log`;
      await host.writeFile(log, "before\n", 0o600);
      const { pid } = await host.spawnDetached(
        ["sh", "-c", 'echo "out $NARWHAL_T $(pwd)"; echo err >&2; exec sleep 300', "ignored-arg0"],
        { env: { NARWHAL_T: token, NARWHAL_LAUNCH_TOKEN: token }, cwd: dir, logFile: log },
      );
      try {
        // The call has returned (for ssh: its session ended) and the process still runs, leading its own session.
        expect(await running(host, pid)).toBe(true);
        const stat = (await host.readFile(`/proc/${pid}/stat`)).toString();
        const [, , pgrp, session] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        expect({ pgrp: Number(pgrp), session: Number(session) }).toEqual({ pgrp: pid, session: pid });
        expect(await host.processEnvToken(pid, "NARWHAL_LAUNCH_TOKEN")).toBe(token);
        const real = (await host.run(["readlink", "-f", dir])).stdout.trim();
        await until("the log to hold both streams", async () =>
          (await host.readFile(log)).toString().includes("err\n"),
        );
        const text = (await host.readFile(log)).toString();
        expect(text.startsWith("before\n")).toBe(true);
        expect(text).toContain(`out ${token} ${real}\n`);
        expect(await host.stat(log)).toMatchObject({ mode: 0o600 });
      } finally {
        await host.run(["kill", "--", `-${pid}`]);
      }
      await until(`pid ${pid} to end`, async () => !(await running(host, pid)));
    });

    it("finds a launch token right after the start, while the process is still exec'ing (its environ reads empty then)", async () => {
      const { host, dir } = setup();
      // A spawn over ssh returns a round trip later, past most exec windows: fewer tries there (0.25 s each).
      for (let i = 0; i < (host.kind === "local" ? 25 : 5); i++) {
        const token = randomUUID();
        const { pid } = await host.spawnDetached(["sh", "-c", "exec sh -c 'exec sleep 300'"], {
          env: { NARWHAL_LAUNCH_TOKEN: token },
          cwd: dir,
          logFile: `${dir}/exec-${i}.log`,
        });
        try {
          expect(await host.processEnvToken(pid, "NARWHAL_LAUNCH_TOKEN")).toBe(token);
        } finally {
          await host.run(["kill", "--", `-${pid}`]);
        }
      }
    });

    it("reads processes started with no environment at all as holding none of the names asked for", async () => {
      const { host, dir } = setup();
      const pids: number[] = [];
      try {
        for (let i = 0; i < 3; i++)
          pids.push(
            (await host.spawnDetached(["env", "-i", "sleep", "300"], { cwd: dir, logFile: `${dir}/bare.log` })).pid,
          );
        await until(
          "the bare processes to exec sleep",
          async () => (await host.listProcesses()).filter((p) => pids.includes(p.pid)).length === 3,
        );
        const envs = await host.processEnvs(pids, ["NARWHAL_LAUNCH_TOKEN"]);
        expect(pids.map((pid) => envs.get(pid))).toEqual([{}, {}, {}]);
        expect(await host.processEnvToken(pids[0]!, "NARWHAL_LAUNCH_TOKEN")).toBeNull();
      } finally {
        for (const pid of pids) await host.run(["kill", "--", `-${pid}`]);
      }
    });

    it("refuses a command that cannot be executed, and a missing cwd, with IoErrors naming them", async () => {
      const { host, dir } = setup();
      const missing = `/nonexistent-${randomUUID()}/python3`;
      const log = `${dir}/spawn-fail.log`;
      await expect(host.spawnDetached([missing], { cwd: dir, logFile: log })).rejects.toMatchObject({
        code: "ENOENT",
        path: missing,
      });
      await host.writeFile(`${dir}/not-exec`, "#!/bin/sh\n", 0o600);
      await expect(host.spawnDetached([`${dir}/not-exec`], { cwd: dir, logFile: log })).rejects.toMatchObject({
        code: "EACCES",
        path: `${dir}/not-exec`,
      });
      const err: unknown = await host
        .spawnDetached(["true"], { cwd: `${dir}/no-cwd`, logFile: log })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IoError);
      expect(err).toMatchObject({ code: "ENOENT", path: `${dir}/no-cwd` });
    });

    it("runs narwhal's Python helpers through python3 looked up once: a path that runs as itself, isolated", async () => {
      const { host } = setup();
      const exe = await host.helperPython.interpreter();
      expect(exe).toMatch(/^\/\S+$/);
      expect(await host.helperPython.interpreter()).toBe(exe);
      const r = await runHelper(host, [
        "-c",
        "import sys; print(sys.executable, sys.flags.isolated, sys.flags.no_site)",
      ]);
      expect(r).toMatchObject({ code: 0, stdout: `${exe} 1 1\n` });
    });

    it("reads the boot id", async () => {
      const { host } = setup();
      expect(await host.bootId()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    });

    it("lists TCP listeners on the node", async () => {
      const { host, listen } = setup();
      const l = await listen();
      try {
        expect(await host.listeners()).toContainEqual({ address: "127.0.0.1", port: l.port });
      } finally {
        await l.stop();
      }
      expect(await host.listeners()).not.toContainEqual({ address: "127.0.0.1", port: l.port });
    });
  });
}
