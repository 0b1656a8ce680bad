// The no-op's growth with the fleet (issue 14: "no-op at 1000 engines: linear"): native simulator fleets of
// each size converged for real, side by side, then the no-op `reconcile --once` of each, interleaved, and what
// a settled watch controller of each spends per resync (bench/fleet-watch.mjs). The
// generated fleets pair every prefill with every decode (one model, one NIXL class: as vLLM pairs them), so
// a fleet of n engines has (n/2)² P/D pairs, each with its proof on record; the fit separates what an engine
// costs from what a pair costs: cpu = fixed + per_engine·n + per_pair·pairs (least squares over the sizes).
//
// 1000 engines are not converged here: 1000 simulator processes (about 22 MB each) and 250,000 proofs of one
// pool do not fit a 2-core machine. The projection says what the fit predicts for 1000 engines in one pool
// and in pools of 16 (64 pairs each): a projection, not a measurement.
import path from "node:path";
import { generateDesired } from "./fleet-gen.mjs";
import { freePortBlock, measureNode, Samples, settleCodeCache } from "./measure.mjs";
import { settledWatchCpu } from "./fleet-watch.mjs";

/** Least squares of cpu ≈ x·row over `rows` (Gaussian elimination of the normal equations, k×k). */
function leastSquares(rows, ys) {
  const k = rows[0].length;
  const idx = [...Array(k).keys()];
  const a = idx.map((i) => idx.map((j) => rows.reduce((s, r) => s + r[i] * r[j], 0)));
  const b = idx.map((i) => rows.reduce((s, r, m) => s + r[i] * ys[m], 0));
  for (let c = 0; c < k; c++) {
    const pivot = a[c][c];
    for (let r = c + 1; r < k; r++) {
      const f = a[r][c] / pivot;
      for (let j = c; j < k; j++) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  const x = Array(k).fill(0);
  for (let r = k - 1; r >= 0; r--)
    x[r] = (b[r] - a[r].slice(r + 1).reduce((s, v, j) => s + v * x[r + 1 + j], 0)) / a[r][r];
  return x;
}

/**
 * The least-squares fit of cpu ≈ fixed + per_engine·n + per_pair·pairs, with the pair's cost never below
 * zero: a proof kept and planned on costs something, and a negative one fitted to noise or to a curve that
 * bends (a larger fleet's no-op runs warmer code) projected negative seconds for one pool of 1000 (-19 s,
 * 2026-12-07-6). When the free fit's pair cost is negative, the best fit with it at zero is the constrained
 * optimum (`pair_term_dropped`): every growth is then an engine's.
 * @param {Array<{ engines: number, pairs: number, cpu_s: number }>} points
 * @returns {{ fixed_s: number, per_engine_s: number, per_pair_s: number, pair_term_dropped: boolean } | null}
 */
export function fitLinear(points) {
  // Pairs grow as (n/2)² here, so three distinct sizes make the system solvable; fewer leave it singular.
  if (new Set(points.map((p) => p.engines)).size < 3) return null;
  const ys = points.map((p) => p.cpu_s);
  const [fixed, perEngine, perPair] = leastSquares(
    points.map((p) => [1, p.engines, p.pairs]),
    ys,
  );
  if (perPair >= 0) return { fixed_s: fixed, per_engine_s: perEngine, per_pair_s: perPair, pair_term_dropped: false };
  return { ...fitEngines(points), per_pair_s: 0, pair_term_dropped: true };
}

/**
 * The least-squares line cpu ≈ fixed + per_engine·n (null with fewer than two distinct sizes).
 * @param {Array<{ engines: number, cpu_s: number }>} points
 * @returns {{ fixed_s: number, per_engine_s: number } | null}
 */
export function fitEngines(points) {
  if (new Set(points.map((p) => p.engines)).size < 2) return null;
  const [fixed_s, per_engine_s] = leastSquares(
    points.map((p) => [1, p.engines]),
    points.map((p) => p.cpu_s),
  );
  return { fixed_s, per_engine_s };
}

const r4 = (x) => Math.round(x * 10_000) / 10_000;

/**
 * A generated native fleet of `n` engines on a free block of ports, converged for real: its trees and the
 * cold converge's measurement. `down` brings it down again (the noop, watch and scale parts share this).
 * @param {{ main: string, env: Record<string, string>, work: string, n: number, tag: string, pool?: number }} o
 *   pool: engines per pool (bench/fleet-gen.mjs); one pool without
 */
export async function convergedFleet({ main, env, work, n, tag, pool }) {
  // Ports of their own (kernel-chosen ranges are not available for a fleet of fixed ports): a free block.
  const basePort = await freePortBlock(3 * n);
  const desired = await generateDesired(path.join(work, `desired-${tag}-${n}`), {
    engines: n,
    basePort,
    ...(pool ? { pool } : {}),
  });
  const state = path.join(work, `state-${tag}-${n}`);
  const noop = () => measureNode([main, "reconcile", "--once", "--desired", desired, "--state", state], { env });
  const down = () => measureNode([main, "down", "--desired", desired, "--state", state], { env, okCodes: [0, 1] });
  // The first reconcile converges it cold; every later one is the no-op the parts measure. A cold converge
  // that fails brings down what it started: the caller never holds this fleet to bring down.
  try {
    const cold = noop();
    settleCodeCache(noop);
    return { n, desired, state, cold, noop, down };
  } catch (err) {
    down();
    throw err;
  }
}

/** P/D pairs of `n` engines, half prefills: in one pool, or in pools of `pool` (pairs within a pool only). */
export const pairsOf = (n, pool) => (pool ? (n / pool) * (pool / 2) ** 2 : (n / 2) ** 2);

/**
 * @param {{ main: string, env: Record<string, string>, work: string, runs: number, sizes: number[], pool?: number }} o
 *   pool: every fleet in pools of this many engines (its pairs then grow as its engines do)
 */
export async function scaleBench({ main, env, work, runs, sizes, pool }) {
  const fleets = [];
  try {
    for (const n of sizes)
      fleets.push({ ...(await convergedFleet({ main, env, work, n, tag: "scale", pool })), samples: new Samples() });
    for (let i = 0; i < runs; i++) for (const f of fleets) f.samples.add(f.noop());
    // Then a watch controller on each, once the no-ops are done (one controller at a time: its CPU is its own).
    for (const f of fleets) f.watch = await settledWatchCpu({ main, desired: f.desired, state: f.state, env });
  } finally {
    for (const f of fleets) f.down();
  }
  const points = fleets.map((f) => {
    const noop = f.samples.summary();
    return {
      engines: f.n,
      pairs: pairsOf(f.n, pool),
      cold_converge_wall_s: f.cold.wall,
      noop,
      settled_watch: f.watch,
      cpu_s: noop.cpu_s,
    };
  });
  return {
    ...(pool ? { pool } : {}),
    sizes: Object.fromEntries(points.map(({ cpu_s: _cpu, ...p }) => [p.engines, p])),
    ...(pool ? projectPooled(points, pool) : projectThousand(points)),
  };
}

/** The fits of `points` with each one left out, those that can be made (enough distinct sizes left). */
const leftOutFits = (points, fit) =>
  points.map((_, i) => fit(points.filter((_, k) => k !== i))).filter((f) => f !== null);

/** [least, greatest] of `values`; null when there are none. */
const rangeOf = (values) => (values.length ? [Math.min(...values), Math.max(...values)] : null);

/**
 * The fit of `points` and what it projects for 1000 engines, in one pool and in pools of 16, with the range of
 * the fits that leave one size out: how well the sizes determine it (pairs grow as n², so the per-engine and
 * per-pair costs trade off against each other, and three sizes fit exactly, whatever their noise). The range is
 * null with fewer than four sizes.
 * @param {Array<{ engines: number, pairs: number, cpu_s: number }>} points
 */
export function projectThousand(points) {
  const onePoolPairs = pairsOf(1000);
  const poolsOf16Pairs = pairsOf(1000, 16);
  const at = (fit, engines, pairs) =>
    fit ? r4(fit.fixed_s + fit.per_engine_s * engines + fit.per_pair_s * pairs) : null;
  const fit = fitLinear(points);
  const leftOut = leftOutFits(points, fitLinear);
  const spread = (pairs) => rangeOf(leftOut.map((f) => at(f, 1000, pairs)));
  return {
    fit: fit && {
      fixed_s: r4(fit.fixed_s),
      per_engine_ms: r4(fit.per_engine_s * 1000),
      per_pair_us: Math.round(fit.per_pair_s * 1e6 * 10) / 10,
      pair_term_dropped: fit.pair_term_dropped,
    },
    projected_1000: {
      one_pool_pairs: onePoolPairs,
      one_pool_cpu_s: at(fit, 1000, onePoolPairs),
      pools_of_16_cpu_s: at(fit, 1000, poolsOf16Pairs),
      one_pool_cpu_s_leave_one_out: spread(onePoolPairs),
      pools_of_16_cpu_s_leave_one_out: spread(poolsOf16Pairs),
    },
  };
}

/**
 * Fleets in pools of `pool`: a pool's pairs grow with its engines, so what an engine adds includes its share of
 * its pool's pairs, and the fit is fixed + per engine (the pair term cannot be told apart). The projection for
 * 1000 engines in pools of `pool` is then one of engines alone, with the range of the fits that leave one size
 * out (null with fewer than three sizes).
 * @param {Array<{ engines: number, pairs: number, cpu_s: number }>} points
 * @param {number} pool
 */
export function projectPooled(points, pool) {
  const fit = fitEngines(points);
  const at = (f) => (f ? r4(f.fixed_s + f.per_engine_s * 1000) : null);
  return {
    fit: fit && { fixed_s: r4(fit.fixed_s), per_engine_ms: r4(fit.per_engine_s * 1000) },
    projected_1000: {
      pool,
      // As projectThousand's pools of 16: 1000 engines at the pools' rate of pairs an engine (4000 for 16).
      pairs: pairsOf(1000, pool),
      cpu_s: at(fit),
      cpu_s_leave_one_out: rangeOf(leftOutFits(points, fitEngines).map(at)),
    },
  };
}
