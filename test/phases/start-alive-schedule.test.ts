// How often a start asks whether its engine still runs while it waits for /health (start.ts aliveAskedEvery):
// each ask is a command on the node over ssh, or a request to a Docker daemon.
import { describe, expect, it } from "vitest";
import { aliveAskedEvery } from "../../src/phases/start.js";

describe("aliveAskedEvery", () => {
  it("asks every 250 ms at first, then at a tenth of the time waited, at most every 5 s", () => {
    expect([0, 1_000, 2_500, 10_000, 30_000, 50_000, 600_000].map(aliveAskedEvery)).toEqual([
      250, 250, 250, 1_000, 3_000, 5_000, 5_000,
    ]);
  });

  it("asks about 150 times over a ten-minute load, not 2,400", () => {
    let asks = 0;
    for (let t = 0, last = -Infinity; t <= 600_000; t += 250) {
      if (t - last >= aliveAskedEvery(t)) {
        asks++;
        last = t;
      }
    }
    expect(asks).toBeGreaterThan(100);
    expect(asks).toBeLessThan(200);
  });
});
