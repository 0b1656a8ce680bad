// `narwhal prune [--keep K] [--dry-run]`: remove run directories beyond the newest
// K per engine (src/state/retention.ts decides, src/state/prune-runs.ts acts). It
// takes the state lock, so it never races a controller: while watch mode runs it is
// refused (exit 1) — watch mode prunes by itself after converging. A failed start's
// kept container is removed with its run, on whichever Docker endpoint holds it.
import type { Config } from "../config.js";
import { World } from "../controller/world.js";
import { validateDesired } from "../desired/load.js";
import { ioFailure, NarwhalError } from "../errors.js";
import type { DesiredState } from "../desired/types.js";
import type { Logger } from "../log.js";
import type { EngineHandle } from "../phases/types.js";
import { acquireStateLock } from "../state/lock.js";
import { pruneRuns, type KeptContainer, type PrunedEngine } from "../state/prune-runs.js";
import { readState } from "../state/store.js";
import { backendsFor, nodeHostsFor } from "../backends/for-config.js";

export interface PruneResult {
  apiVersion: "narwhal/v1";
  kind: "PruneResult";
  dry_run: boolean;
  keep: number;
  engines: PrunedEngine[];
}

/**
 * Removes kept containers through the backends (listing what the state directory owns once), and a
 * run's copy on an ssh node through the node's host access. Nodes come from desired/: an engine it
 * does not name is taken to run here (its runs have no node-side copy narwhal knows of).
 */
function nodeSide(config: Config, log: Logger) {
  let world: World | undefined;
  let owned: Array<{ handle: EngineHandle }> | undefined;
  const hosts = nodeHostsFor(config);
  const desired = validateDesired(config.desiredDir).catch(() => null);
  const nodeOf = async (engine: string) => (await desired)?.state?.specs.find((s) => s.name === engine)?.node;
  const removeKept = async (kept: KeptContainer) => {
    if (!world) {
      const backends = backendsFor(config, undefined, hosts, log);
      const specs = (await desired)?.state?.specs;
      if (specs) for (const b of Object.values(backends)) b.knowHosts?.(specs);
      world = new World(backends, log, config.stopGraceMs, { hosts, stateDir: config.stateDir });
      owned = (await world.listOwned(true, true)).map((o) => o.owned);
    }
    const found = owned?.find((o) => o.handle.kind === "container" && o.handle.container_id === kept.id);
    if (found) return world.stop(found.handle);
    const unlisted = world.unlistedNodes();
    if (unlisted.length > 0)
      throw new NarwhalError(
        `container ${kept.name} on ${kept.endpoint} cannot be looked for: ${unlisted.map((u) => `${u.node}: ${u.message}`).join("; ")}`,
        { engine: kept.engine, step: "stop", retryable: true, fix: "Run narwhal prune again once the node answers." },
      );
  };
  const removeOnNode = async (engine: string, dir: string) => {
    const node = await nodeOf(engine);
    if (!node?.ssh) return;
    hosts.learn([{ node }]);
    const there = hosts.runDirOnNode(node.name, dir);
    const r = await hosts.access(node.name).run(["rm", "-rf", "--", there]);
    if (r.code !== 0)
      throw new NarwhalError(`rm -rf ${there} on node ${node.name} failed: ${r.stderr.trim() || `exit ${r.code}`}`, {
        engine,
        step: "stop",
        input: there,
        retryable: true,
        fix: `Remove ${there} on ${node.name} by hand, or run narwhal prune again once the node answers.`,
      });
  };
  return { removeKept, removeOnNode, close: () => hosts.close() };
}

export async function prune(config: Config, log: Logger, keep: number, dryRun: boolean): Promise<PruneResult> {
  const lock = await acquireStateLock(config.stateDir).catch((err: unknown) => {
    throw ioFailure(err, { step: "state" });
  });
  const node = nodeSide(config, log);
  try {
    // Only the lock holder writes narwhal.log.
    if (!dryRun) log.recordTo(config.stateDir);
    const state = await readState(config.stateDir);
    const { removeKept, removeOnNode } = node;
    const engines = await pruneRuns(config.stateDir, state, { keep, dryRun, removeKept, removeOnNode });
    for (const e of engines)
      for (const r of e.removed) if (!dryRun) log.info(`pruned run ${r.run}`, { engine: e.engine });
    return { apiVersion: "narwhal/v1", kind: "PruneResult", dry_run: dryRun, keep, engines };
  } finally {
    await node.close();
    await lock.release();
  }
}

export function renderText(r: PruneResult): string {
  const lines: string[] = [];
  const verb = r.dry_run ? "would remove" : "removed";
  for (const e of r.engines) {
    for (const x of e.removed)
      lines.push(`${e.engine}: ${verb} ${x.run}${x.kept_container ? ` and container ${x.kept_container}` : ""}`);
    for (const x of e.failed) lines.push(`${e.engine}: kept ${x.run}: ${x.why}`);
    const referenced = e.kept.filter((k) => !k.why.startsWith("one of the newest"));
    for (const x of referenced) lines.push(`${e.engine}: kept ${x.run}: ${x.why} points to it`);
  }
  const n = r.engines.reduce((a, e) => a + e.removed.length, 0);
  lines.push(`${n} run director${n === 1 ? "y" : "ies"} ${verb} (keeping the newest ${r.keep} per engine)`);
  return lines.join("\n");
}

/**
 * Watch mode's retention: `tick()` (each resync) prunes when the controller has converged
 * (nothing queued or running, every engine settled), one prune at a time, and only when the state
 * changed since the last prune (`changes`: the controller's count of state writes that changed more
 * than when engines were observed): a settled fleet's resyncs decide nothing new, and reading the state
 * and every engine's runs root for it cost each resync O(fleet). The controller holds
 * the lock; runs with a kept container stay (the engine's next start removes the container, and
 * `narwhal prune` both). A failure is logged: retention never stops the controller.
 */
export function watchPruner(
  config: Config,
  log: Logger,
  settled: () => boolean,
  desired: () => DesiredState | undefined,
  changes: () => number,
) {
  // A run on a node reached over ssh also has a copy there; the controller's own connections are not
  // shared with retention, so those runs stay for `narwhal prune`, which reaches the node itself.
  const removeOnNode = (engine: string): Promise<void> => {
    const node = desired()?.specs.find((s) => s.name === engine)?.node;
    if (!node?.ssh) return Promise.resolve();
    return Promise.reject(new Error(`it runs on node ${node.name} over ssh: narwhal prune removes it there too`));
  };
  let running: Promise<void> = Promise.resolve();
  let busy = false;
  let prunedAt: number | null = null;
  const once = async () => {
    const state = await readState(config.stateDir);
    const engines = await pruneRuns(config.stateDir, state, { keep: config.keepRuns, dryRun: false, removeOnNode });
    for (const e of engines) for (const r of e.removed) log.info(`pruned run ${r.run}`, { engine: e.engine });
  };
  return {
    tick(): void {
      if (busy || !settled() || changes() === prunedAt) return;
      busy = true;
      const at = changes();
      running = once()
        .then(() => void (prunedAt = at))
        .catch((err: unknown) => log.warn(`cannot prune run directories: ${(err as Error).message}`))
        .finally(() => (busy = false));
    },
    /** Resolves when no prune is running. */
    idle: (): Promise<void> => running,
  };
}
