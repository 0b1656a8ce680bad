// bench/fleet-scale.mjs separates what an engine and a P/D pair add to a no-op by least squares: on points
// that lie on a plane it recovers the plane, on noisy points the best plane, and with fewer than three
// distinct sizes it says it cannot separate them instead of dividing by zero.
import { describe, expect, it } from "vitest";
import { fitLinear, pairsOf, projectPooled, projectThousand } from "../../bench/fleet-scale.mjs";

const fleet = (engines: number, cpu: (n: number, p: number) => number) => {
  const pairs = (engines / 2) ** 2;
  return { engines, pairs, cpu_s: cpu(engines, pairs) };
};

type Fit = { fixed_s: number; per_engine_s: number; per_pair_s: number };
type Point = { engines: number; pairs: number; cpu_s: number };

/** Any step of one of `steps` away from `fit` leaves a larger sum of squared residuals over `points`. */
function expectLeastSquares(points: Point[], fit: Fit, steps: Array<[keyof Fit, number]>) {
  const residual = (x: Fit) =>
    points.reduce((s, p) => s + (x.fixed_s + x.per_engine_s * p.engines + x.per_pair_s * p.pairs - p.cpu_s) ** 2, 0);
  for (const [k, d] of steps)
    for (const sign of [1, -1]) expect(residual({ ...fit, [k]: fit[k] + sign * d })).toBeGreaterThan(residual(fit));
}

describe("fitLinear", () => {
  it("recovers fixed, per-engine and per-pair cost from points on a plane", () => {
    const plane = (n: number, p: number) => 0.25 + 0.004 * n + 0.00002 * p;
    const fit = fitLinear([16, 32, 64, 96].map((n) => fleet(n, plane)))!;
    expect(fit.fixed_s).toBeCloseTo(0.25, 9);
    expect(fit.per_engine_s).toBeCloseTo(0.004, 9);
    expect(fit.per_pair_s).toBeCloseTo(0.00002, 9);
  });

  it("gives the least-squares plane of noisy points", () => {
    const points = [
      { engines: 16, pairs: 64, cpu_s: 0.3 },
      { engines: 32, pairs: 256, cpu_s: 0.5 },
      { engines: 64, pairs: 1024, cpu_s: 0.8 },
      { engines: 96, pairs: 2304, cpu_s: 1.3 },
    ];
    expectLeastSquares(points, fitLinear(points)!, [
      ["fixed_s", 0.01],
      ["per_engine_s", 0.0005],
      ["per_pair_s", 0.00001],
    ]);
  });

  it("never fits a pair a negative cost: a curve that bends is fitted by engines alone", () => {
    // 2026-12-07-7's no-ops (medians of 11): the free fit gave -133 µs a pair and -27 s for one pool of 1000.
    const points = [
      { engines: 16, pairs: 64, cpu_s: 0.254 },
      { engines: 24, pairs: 144, cpu_s: 0.301 },
      { engines: 32, pairs: 256, cpu_s: 0.33 },
      { engines: 48, pairs: 576, cpu_s: 0.391 },
      { engines: 64, pairs: 1024, cpu_s: 0.434 },
    ];
    const fit = fitLinear(points)!;
    expect(fit).toMatchObject({ per_pair_s: 0, pair_term_dropped: true });
    expect(fit.per_engine_s).toBeCloseTo(0.00368, 4);
    // The best line (the pair's cost held at zero).
    expectLeastSquares(points, fit, [
      ["fixed_s", 0.005],
      ["per_engine_s", 0.0001],
    ]);
    const j = projectThousand(points).projected_1000;
    expect(j.one_pool_cpu_s).toBeGreaterThan(0);
    expect(j.one_pool_cpu_s).toBe(j.pools_of_16_cpu_s);
    expect(fitLinear([16, 32, 64].map((n) => fleet(n, (e, p) => 0.25 + 0.004 * e + 0.00002 * p)))).toMatchObject({
      pair_term_dropped: false,
    });
  });

  it("cannot separate costs with fewer than three distinct sizes", () => {
    const plane = (n: number, p: number) => 0.25 + 0.004 * n + 0.00002 * p;
    expect(fitLinear([fleet(16, plane), fleet(32, plane)])).toBeNull();
    expect(fitLinear([fleet(16, plane), fleet(16, plane), fleet(32, plane)])).toBeNull();
  });
});

describe("projectThousand", () => {
  const plane = (n: number, p: number) => 0.25 + 0.004 * n + 0.00002 * p;

  it("projects 1000 engines from the fit, in one pool and in pools of 16", () => {
    const { fit, projected_1000: j } = projectThousand([16, 24, 32, 48, 64].map((n) => fleet(n, plane)));
    expect(fit).toMatchObject({ fixed_s: 0.25, per_engine_ms: 4 });
    expect(j.one_pool_cpu_s).toBeCloseTo(0.25 + 4 + 0.00002 * 250_000, 3);
    expect(j.pools_of_16_cpu_s).toBeCloseTo(0.25 + 4 + 0.00002 * 4000, 3);
    // points on a plane: every fit that leaves one out finds the same plane
    expect(j.one_pool_cpu_s_leave_one_out![0]).toBeCloseTo(j.one_pool_cpu_s!, 3);
    expect(j.one_pool_cpu_s_leave_one_out![1]).toBeCloseTo(j.one_pool_cpu_s!, 3);
  });

  it("says how far one noisy size moves the projection, and cannot say with three sizes", () => {
    // 10 ms of noise on one size of five: a projection 15 times further out moves by far more
    const noisy = [16, 24, 32, 48, 64].map((n) => fleet(n, (e, p) => plane(e, p) + (n === 32 ? 0.01 : 0)));
    const range = projectThousand(noisy).projected_1000.pools_of_16_cpu_s_leave_one_out!;
    const [lo, hi] = [range[0]!, range[1]!];
    expect(hi - lo).toBeGreaterThan(0.1);
    expect(lo).toBeLessThanOrEqual(projectThousand(noisy).projected_1000.pools_of_16_cpu_s!);
    const three = projectThousand([16, 32, 64].map((n) => fleet(n, plane))).projected_1000;
    expect(three.pools_of_16_cpu_s).toBeCloseTo(0.25 + 4 + 0.08, 3);
    expect(three.pools_of_16_cpu_s_leave_one_out).toBeNull();
    expect(three.one_pool_cpu_s_leave_one_out).toBeNull();
  });
});

describe("projectPooled", () => {
  it("fits engines alone when the pairs grow with them, and projects 1000 engines in pools", () => {
    // Pools of 16: 64 pairs a pool, so 4 pairs an engine; what a pair costs is part of an engine's share.
    const line = (n: number) => 0.2 + 0.003 * n + 0.00002 * pairsOf(n, 16);
    const points = [32, 64, 96, 128].map((n) => ({ engines: n, pairs: pairsOf(n, 16), cpu_s: line(n) }));
    const { fit, projected_1000: j } = projectPooled(points, 16);
    expect(fit).toMatchObject({ fixed_s: 0.2, per_engine_ms: 3.08 });
    expect(j).toMatchObject({ pool: 16, pairs: 4000 });
    expect(j.cpu_s).toBeCloseTo(0.2 + 3.08, 3);
    expect(j.cpu_s_leave_one_out![0]).toBeCloseTo(j.cpu_s!, 3);
    expect(j.cpu_s_leave_one_out![1]).toBeCloseTo(j.cpu_s!, 3);
    // The pair term is collinear with engines here: the three-term fit could not separate it.
    expect(projectPooled(points.slice(0, 2), 16).projected_1000.cpu_s_leave_one_out).toBeNull();
    expect(pairsOf(64, 16)).toBe(256);
    expect(pairsOf(64, undefined)).toBe(1024);
  });
});
