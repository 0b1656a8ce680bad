// Issue 10 item 4, the controller's part, on a simulated native fleet of two
// real engine processes: while engine-2's node cannot be reached, `reconcile
// --once` observes engine-2 "unknown" (never restarted, never taken for lost),
// records NodeReachable=False, reconciles engine-1, and ends non-zero naming the
// node after NARWHAL_ONCE_OUTWAIT_MS; once the node answers, a rerun exits 0
// with NodeReachable=True and both engines still the processes they were.
// The node fault enters where SshHost raises it, at the backend: every backend
// call about engine-2's engine throws the NodeUnreachable that OpenSSH's
// "Connection refused" is classified as (src/hosts/ssh-errors.ts). The whole
// path over a real rig host (its sshd stopped) is test/e2e/two-host-rig.test.ts ("host B unreachable blocks only engine-2").
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { Controller } from "../../src/controller/controller.js";
import { backendsFor, nodeHostsFor } from "../../src/cli/runtime.js";
import { appIdentity, checkScriptPath } from "../../src/app.js";
import { loadDesired } from "../../src/desired/load.js";
import { convergeOnce } from "../../src/cli/reconcile.js";
import { classifySshFailure } from "../../src/hosts/ssh-errors.js";
import type { EngineBackend, OwnedEngine } from "../../src/backends/types.js";
import { readState } from "../../src/state/store.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { memoryLogger } from "./controller-harness.js";
import { engineProcesses, TEST_ENV, teardown } from "./cli.js";

const REFUSED = "ssh: connect to host 10.99.0.2 port 22: Connection refused";
const NODE_B = { node: "node-b", destination: "root@10.99.0.2", port: 22, knownHostsFile: "/k" };

/**
 * Every call of `backend` that names the launch token in `down` throws what SshHost raises for an unreachable
 * node, and its process-table scan (listOwned) does not list those engines.
 */
function unreachableFor(
  backend: EngineBackend,
  down: Set<string>,
  /** Launch tokens whose next isAlive fails as an unreachable node (a blip: the node is back at once). */
  blips: Set<string>,
  /** Called with each run an engine was started (or found) for: a node may go away right after. */
  started: (run: { engine: string; launch_token: string }) => void = () => {},
): EngineBackend {
  const names = (arg: unknown) =>
    !!arg && typeof arg === "object" && down.has(String((arg as { launch_token?: unknown }).launch_token));
  return new Proxy(backend, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (args.some(names)) return Promise.reject(classifySshFailure(REFUSED, NODE_B)!);
        if (prop === "isAlive" && blips.delete(String((args[0] as { launch_token?: unknown }).launch_token)))
          return Promise.reject(classifySshFailure(REFUSED, NODE_B)!);
        const out = (value as (...a: unknown[]) => unknown).apply(target, args);
        // A scan of a node that cannot be reached lists none of its engines (a full observation takes a listed
        // engine's liveness from the scan, and asks isAlive of the others).
        if (prop === "listOwned")
          return (out as Promise<OwnedEngine[]>).then((list) => list.filter((o) => !down.has(o.launch_token)));
        if (prop === "ensureStarted")
          return (out as Promise<unknown>).then(
            (h) => (started(args[0] as { engine: string; launch_token: string }), h),
          );
        return out;
      };
    },
  });
}

describe("reconcile --once while one engine's node cannot be reached", () => {
  let fleet: SimFleet;
  const down = new Set<string>();
  const blips = new Set<string>();
  /** Set by a test: the engine whose node blips once its engine is spawned (still loading). */
  let blipAfterStartOf: string | null = null;
  const goneAfterStart = (run: { engine: string; launch_token: string }) => {
    if (run.engine === blipAfterStartOf) {
      blips.add(run.launch_token);
      blipAfterStartOf = null;
    }
  };

  async function once(): Promise<{ code: number; out: string; lines: string[] }> {
    const config = loadConfig(
      { desired: fleet.dir, state: fleet.stateDir },
      {
        PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        HOME: path.dirname(fleet.dir),
        ...TEST_ENV,
        NARWHAL_ONCE_OUTWAIT_MS: "2000",
      },
    );
    const { log, lines } = memoryLogger();
    const hosts = nodeHostsFor(config);
    const real = backendsFor(config, undefined, hosts);
    const controller = new Controller({
      config,
      log,
      app: appIdentity(),
      scriptPath: checkScriptPath(),
      backends: {
        native: unreachableFor(real.native, down, blips, (run) => goneAfterStart(run)),
        container: real.container,
      },
      hosts,
      mode: "once",
    });
    await controller.open();
    let out = "";
    const { code } = await convergeOnce(controller, config, await loadDesired(fleet.dir), "text", (s) => (out += s));
    return { code, out, lines: lines.filter((l) => l.level === "warn").map((l) => l.message) };
  }
  const pids = async () =>
    Object.fromEntries((await engineProcesses(fleet.stateDir)).map((p) => [p.engine, p.pid] as const));
  const nodeReachable = async (engine: string) =>
    (await readState(fleet.stateDir)).engines[engine]!.conditions.find((c) => c.type === "NodeReachable");

  beforeAll(async () => {
    fleet = await simFleet();
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  it("converges both engines while every node answers", async () => {
    const r = await once();
    expect(r.code, r.out).toBe(0);
    expect(Object.keys(await pids()).sort()).toEqual(["engine-1", "engine-2"]);
    expect(await nodeReachable("engine-2")).toBeUndefined();
  });

  it("ends non-zero naming the node, engine-1 reconciled, engine-2 neither restarted nor lost, NodeReachable=False", async () => {
    const before = await pids();
    const state = await readState(fleet.stateDir);
    down.add(state.engines["engine-2"]!.handle!.launch_token);
    const r = await once();
    expect(r.code, r.out).toBe(2);
    expect(r.out).toMatch(
      /not converged: engine-2: node node-b cannot be reached \(node node-b: cannot reach root@10\.99\.0\.2 port 22 \(ssh: connect to host 10\.99\.0\.2 port 22: Connection refused\)\), after outwaiting it for 2 s \(NARWHAL_ONCE_OUTWAIT_MS\); the other engines were reconciled/,
    );
    expect(r.out).toMatch(/^NodeReachable=False for engine-2 \(Unreachable\) node node-b: cannot reach/m);
    expect(await nodeReachable("engine-2")).toMatchObject({ status: "False", reason: "Unreachable" });
    expect(await nodeReachable("engine-1")).toBeUndefined();
    const after = await readState(fleet.stateDir);
    expect(after.engines["engine-1"]!.phase).toBe("captured");
    expect(after.engines["engine-2"]!.phase).toBe("captured"); // not taken for lost: nothing was known
    expect(await pids()).toEqual(before);
    // Told per node, not once per engine per observation.
    const told = r.lines.filter((l) => l.startsWith("node node-b cannot be reached"));
    expect(told.length).toBeGreaterThan(0);
    expect(told.every((l) => l.includes("its engines engine-2 cannot be observed now"))).toBe(true);
    expect(r.lines.filter((l) => !l.startsWith("node node-b cannot be reached"))).toEqual([]);
  });

  it("once the node answers, converges with NodeReachable=True and restarts nothing", async () => {
    const before = await pids();
    down.clear();
    const r = await once();
    expect(r.code, r.out).toBe(0);
    expect(r.out).not.toContain("NodeReachable=False");
    expect(await nodeReachable("engine-2")).toMatchObject({ status: "True", reason: "Reachable" });
    expect(await pids()).toEqual(before);
  });

  it("a node that blips while its engine loads does not kill the engine: the start resumes from the same run", async () => {
    await teardown(fleet.stateDir);
    // The switch on both, scoped to engine-2: one runtime environment, one group (a pair to prove).
    fleet = await simFleet({ engines: [{ faults: "slow_start=2@engine-2" }, { faults: "slow_start=2@engine-2" }] });
    blipAfterStartOf = "engine-2";
    const r = await once();
    expect(r.code, r.out).toBe(0);
    expect(blips.size, "the blip never happened").toBe(0);
    // One engine-2 was ever started: one run directory, its process the one that serves.
    const runs = await fs.readdir(path.join(fleet.stateDir, "runs", "engine-2"));
    expect(runs.filter((d) => !d.startsWith("."))).toHaveLength(1);
    const state = await readState(fleet.stateDir);
    expect(state.engines["engine-2"]!.phase).toBe("captured");
    expect((await pids())["engine-2"]).toBe((state.engines["engine-2"]!.handle as { pid: number }).pid);
  });
});
