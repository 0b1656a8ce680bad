// The planner over arbitrary observed states (any phase, liveness, retiring,
// deferred, terminal, halted, owned engines, recorded proofs and NIXL hashes,
// at startup or not): it never throws, gives every action a reason, never acts
// on a guess or twice on one engine, never removes what is already being
// removed, serves only captured engines of one group among prefill/decode, and
// lists only proven pairs, proving at most one pair per decode.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { inService, isPairedRole } from "../../src/controller/serving-fleet.js";
import { maxUnavailable } from "../../src/controller/rollout.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import { pairKey } from "../../src/controller/plan-types.js";
import type {
  DesiredEngine,
  Liveness,
  ObservedEngine,
  ObservedProof,
  OwnedObserved,
} from "../../src/controller/plan-types.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  handleOf,
  incompatibleEdit,
  observedOf,
  owned,
  proofOf,
  specOf,
} from "./plan-fixtures.js";

const PHASES = [
  "pending",
  "inspected",
  "prepared",
  "checked",
  "started",
  "probed",
  "captured",
  "failed",
  "replacing",
  "removing",
  "removed",
];
const liveness = fc.constantFrom<Liveness>("alive", "alive", "gone", "unknown");
/** Mostly absent: a converged engine is the common case, and the one rollouts act on. */
const rarely = <T>(arb: fc.Arbitrary<T>) =>
  fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });

/** Engine n in one of three versions (as desired, or as applied). */
const version = (n: number, role: string, v: number): DesiredEngine => {
  const s = specOf(n, role);
  return desiredOf(v === 0 ? s : v === 1 ? compatibleEdit(s) : incompatibleEdit(s));
};

const engineArb = (n: number) =>
  fc
    .record({
      role: fc.constantFrom("prefill", "decode", "decode", "embed"),
      desired: fc.option(fc.nat(2), { nil: null }),
      observed: fc.option(
        fc.record({
          applied: fc.nat(2),
          phase: fc.oneof(
            { weight: 2, arbitrary: fc.constant("captured") },
            { weight: 3, arbitrary: fc.constantFrom(...PHASES) },
          ),
          handle: fc.option(liveness, { nil: null }),
          retiring: rarely(fc.record({ v: fc.nat(2), liveness })),
          deferred: rarely(fc.record({ remove: fc.boolean(), v: fc.nat(2) })),
          terminal: fc.boolean(),
          problem: rarely(fc.constant("health check failed twice")),
          has_actor: fc.boolean(),
          halted: rarely(fc.constant("recorded halt")),
          applied_inputs_known: fc.boolean(),
          group: fc.option(fc.constantFrom("g1", "g2"), { nil: undefined }),
          nixl: fc.option(fc.constantFrom("h1", "h2"), { nil: null }),
        }),
        { nil: null },
      ),
      owned: fc.uniqueArray(fc.record({ token: fc.constantFrom("a", "b", "recorded"), adoptable: fc.boolean() }), {
        maxLength: 2,
        selector: (w) => w.token,
      }),
    })
    .map((e) => ({ n, ...e }));

const fleetArb = fc.tuple(fc.integer({ min: 1, max: 6 }), fc.boolean()).chain(([n, startup]) =>
  fc.record({
    engines: fc.tuple(...Array.from({ length: n }, (_, i) => engineArb(i + 1))),
    startup: fc.constant(startup),
    /** Per pair of engines (by index), what proof is recorded: none, current passed/failed/scrape, or stale. */
    proofs: fc.array(fc.constantFrom("none", "passed", "passed", "failed", "watch", "stale"), {
      minLength: n * n,
      maxLength: n * n,
    }),
  }),
);

/** The recorded proof `kind` of prefill `p` → decode `d` as they run now (stale: an older prefill instance). */
function recorded(kind: string, p: ObservedEngine, d: ObservedEngine): ObservedProof | null {
  if (kind === "none") return null;
  const failed = kind === "failed" || kind === "watch";
  const proof = proofOf(p, d, {
    passed: !failed,
    cause: failed ? "transfer-failed" : null,
    source: kind === "watch" ? "watch" : "proof",
    failures: failed ? 1 : 0,
  });
  return kind === "stale" ? { ...proof, prefill: { ...proof.prefill, launch_token: "tok-before" } } : proof;
}

describe("planner over arbitrary observed states", () => {
  it("is total, explained, and never acts twice, on a guess, or on a removal under way", () => {
    fc.assert(
      fc.property(fleetArb, ({ engines, startup, proofs: kinds }) => {
        const desired: DesiredEngine[] = [];
        const obs: ObservedEngine[] = [];
        const own: OwnedObserved[] = [];
        for (const e of engines) {
          if (e.desired !== null) desired.push(version(e.n, e.role, e.desired));
          // A removed actor holds no engine (the machine clears both handles on the way).
          const o =
            e.observed &&
            (e.observed.phase === "removed" ? { ...e.observed, handle: null, retiring: null } : e.observed);
          if (o) {
            const applied = version(e.n, e.role, o.applied);
            obs.push(
              captured(applied, {
                phase: o.phase,
                applied_inputs: o.applied_inputs_known ? applied.inputs : null,
                handle: o.handle ? handleOf(`engine-${e.n}`) : null,
                liveness: o.handle,
                running_hash: o.handle ? applied.input_hash : null,
                retiring: o.retiring
                  ? {
                      handle: handleOf(`engine-${e.n}`, `old-${e.n}`),
                      hash: version(e.n, e.role, o.retiring.v).input_hash,
                      liveness: o.retiring.liveness,
                    }
                  : null,
                deferred: o.deferred
                  ? o.deferred.remove
                    ? { remove: true }
                    : { desiredHash: version(e.n, e.role, o.deferred.v).input_hash }
                  : null,
                terminal: o.terminal,
                problem: o.problem,
                has_actor: o.has_actor,
                halted: o.halted,
                ...(o.group === undefined ? {} : { group_signature: o.group }),
                nixl_hash: o.nixl,
              }),
            );
          }
          // "recorded": the engine its record's handle stands for (claimed unless the record has no handle).
          for (const w of e.owned)
            own.push(
              owned(`engine-${e.n}`, w.token === "recorded" ? `tok-engine-${e.n}` : `${w.token}-${e.n}`, {
                adoptable: w.adoptable,
              }),
            );
        }
        const proofs: Record<string, ObservedProof> = {};
        obs.forEach((p, i) =>
          obs.forEach((d, j) => {
            const proof = recorded(kinds[i * obs.length + j] ?? "none", p, d);
            if (proof && p.role === "prefill" && d.role === "decode") proofs[pairKey(p.engine, d.engine)] = proof;
          }),
        );
        const observed = observedOf(obs, { owned: own, proofs });
        const p = plan(desiredFor(desired), observed, { rollout: desiredFor([]).rollout, startup });
        expect(plan(desiredFor(desired), observed, { rollout: desiredFor([]).rollout, startup })).toEqual(p);

        for (const a of p.actions) expect(a.kind === "wait" ? a.why : a.reason).toMatch(/\S/);
        const decisive = ["create", "replace", "remove", "adopt", "retry"];
        for (const name of new Set(p.actions.map((a) => a.engine))) {
          const mine = p.actions.filter((a) => a.engine === name && a.kind !== "sweep-orphan");
          expect(
            mine.filter((a) => decisive.includes(a.kind)).length,
            `${name}: ${mine.map((a) => a.kind)}`,
          ).toBeLessThanOrEqual(1);
          expect(mine.filter((a) => a.kind === "wait").length).toBeLessThanOrEqual(1);
          const o = observed.engines[name];
          if (o?.liveness === "unknown") expect(mine.filter((a) => a.kind !== "wait")).toEqual([]);
          if (o && (o.phase === "removing" || o.phase === "removed" || o.deferred?.remove))
            expect(mine.some((a) => a.kind === "remove")).toBe(false);
          if (o?.deferred) expect(mine.some((a) => a.kind === "replace")).toBe(false);
          if (mine.some((a) => a.kind === "adopt")) expect(startup && !o).toBe(true);
          if (mine.some((a) => a.kind === "retry")) expect(startup && o?.has_actor === false && o.terminal).toBe(true);
        }
        // Each owned engine is adopted, swept, or claimed: exactly one.
        for (const w of own) {
          const uses = p.actions.filter(
            (a) => (a.kind === "adopt" || a.kind === "sweep-orphan") && a.launch_token === w.launch_token,
          ).length;
          expect(uses + (observed.claimed.includes(w.launch_token) ? 1 : 0)).toBe(1);
        }
        const replaced = p.actions.filter((a) => a.kind === "replace").map((a) => a.engine);
        if (p.halted.length) expect(replaced).toEqual([]);
        // (a) in one step from any state: releasing a serving engine never puts its role past max_unavailable.
        // An engine this plan restarts (lost, or its own proof failed) is out for that repair, which has its own
        // budget (kv-plan.ts): its change rides along with the restart and takes nothing more out of service.
        const restarted = new Set(
          p.actions.filter((a) => a.kind === "restart-lost" || a.kind === "restart-unproven").map((a) => a.engine),
        );
        const disrupted = new Set([...restarted, ...replaced]);
        for (const role of new Set(desired.map((d) => d.role))) {
          const ofRole = desired.filter((d) => d.role === role);
          const released = (d: DesiredEngine) =>
            replaced.includes(d.engine) && !restarted.has(d.engine) && inService(observed.engines[d.engine]);
          if (!ofRole.some(released)) continue;
          const out = ofRole.filter((d) => disrupted.has(d.engine) || !inService(observed.engines[d.engine]));
          expect(out.length, `${role}: ${out.map((d) => d.engine)}`).toBeLessThanOrEqual(
            maxUnavailable(DEFAULT_ROLLOUT, role, ofRole.length),
          );
        }
        for (const s of p.serving.engines) expect(observed.engines[s.engine]?.phase).toBe("captured");
        expect(
          new Set(p.serving.engines.filter((s) => isPairedRole(s.role)).map((s) => s.group_signature)).size,
        ).toBeLessThanOrEqual(1);
        expect(p.changes).toBe(p.actions.some((a) => a.kind !== "wait") || p.rollout.length > 0);
        // Proofs: at most one per decode, none of an engine out of service or taken out by this plan.
        const proves = p.actions.filter((a) => a.kind === "prove");
        expect(new Set(proves.map((a) => a.engine)).size).toBe(proves.length);
        const out = new Set(
          p.actions.filter((a) => !["wait", "prove", "sweep-orphan"].includes(a.kind)).map((a) => a.engine),
        );
        for (const a of proves) {
          expect(inService(observed.engines[a.engine]) && inService(observed.engines[a.prefill])).toBe(true);
          expect(out.has(a.engine) || out.has(a.prefill), `${a.prefill} → ${a.engine} proven while taken out`).toBe(
            false,
          );
        }
        // Listed pairs: every listed prefill × decode, each with a passed proof of the instances that run now.
        const listed = (role: string) => p.serving.engines.filter((e) => e.role === role).map((e) => e.engine);
        expect(p.serving.pairs).toEqual(
          listed("prefill").flatMap((a) => listed("decode").map((b) => ({ prefill: a, decode: b }))),
        );
        for (const { prefill, decode } of p.serving.pairs ?? []) {
          const proof = observed.proofs?.[pairKey(prefill, decode)];
          expect(proof?.passed, `${prefill} → ${decode} listed unproven`).toBe(true);
          expect(proof?.prefill.launch_token).toBe(observed.engines[prefill]?.handle?.launch_token);
          expect(proof?.decode.launch_token).toBe(observed.engines[decode]?.handle?.launch_token);
          const [a, b] = [observed.engines[prefill]!.nixl_hash, observed.engines[decode]!.nixl_hash];
          expect(a == null || b == null || a === b, `${prefill} → ${decode}: NIXL hashes differ`).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});
