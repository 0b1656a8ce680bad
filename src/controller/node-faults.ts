// The nodes one observation could not use (an unreachable node, a host key or
// a key it refused), with the engines each holds: told once per node, not once
// per engine, so a fleet of forty engines behind one dead host logs one line.
import type { NodeFault } from "../errors.js";
import type { Logger } from "../log.js";
import type { Observed } from "./plan-types.js";
import { nodeWords } from "./rollout.js";
import { compareNames } from "./serving-fleet.js";

const REASON_WORDS: Record<NodeFault["reason"], string> = {
  unreachable: "cannot be reached",
  "host-key": "does not present the host key recorded for it",
  auth: "refuses narwhal's key",
};

export class NodeFaults {
  private readonly byNode = new Map<string, { fault: NodeFault; engines: Set<string> }>();

  /** The engine's node failed it in this observation. */
  note(engine: string, fault: NodeFault): void {
    const seen = this.byNode.get(fault.node) ?? { fault, engines: new Set<string>() };
    seen.engines.add(engine);
    this.byNode.set(fault.node, seen);
  }

  get size(): number {
    return this.byNode.size;
  }

  /** One warning per node, naming its engines and what is (not) done about them. */
  report(log: Logger): void {
    for (const [node, { fault, engines }] of [...this.byNode].sort(([a], [b]) => compareNames(a, b))) {
      const names = [...engines].sort(compareNames).join(", ");
      log.warn(
        `node ${node} ${REASON_WORDS[fault.reason]} (${fault.message}); its engines ${names} cannot be observed now and are neither restarted nor treated as lost until it answers`,
      );
    }
  }
}

/** Engines of an observation whose engine (or the one it replaces) cannot be observed, each with why. */
export function unobservable(observed: Observed | null): Array<{ engine: string; why: string }> {
  return Object.values(observed?.engines ?? {})
    .filter((o) => o.liveness === "unknown" || o.retiring?.liveness === "unknown")
    .sort((a, b) => compareNames(a.engine, b.engine))
    .map((o) => ({
      engine: o.engine,
      why: o.node_fault ? nodeWords(o.node_fault) : `its ${o.backend} engine cannot be observed now`,
    }));
}
