// bench/fleet-gen.mjs in pools: every engine of a pool has its pool's NIXL class (model and KV cache dtype) and
// no two pools share one, so a prefill pairs only with its pool's decodes; a pool size that does not divide the
// fleet, or more pools than classes, is refused. That the classes really do not pair, and that such a fleet
// converges, is the scale bench's own run (bench/fleet.mjs --scale-pool).
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { generateDesired } from "../../bench/fleet-gen.mjs";

type Launch = { engines: Record<string, { role: string; runtime: { model_dtype: string; kv_cache_dtype: string } }> };

describe("generateDesired in pools", () => {
  it("gives each pool a NIXL class of its own, prefills and decodes alike", async () => {
    const dir = await generateDesired(path.join(await fs.mkdtemp(path.join(os.tmpdir(), "fleet-gen-")), "d"), {
      engines: 48,
      pool: 16,
    });
    const launch = JSON.parse(await fs.readFile(path.join(dir, "engine-launch.json"), "utf8")) as Launch;
    const classOf = (k: number) => {
      const rt = launch.engines[`engine-${k}`]!.runtime;
      return `${rt.model_dtype}/${rt.kv_cache_dtype}`;
    };
    const pools = [0, 1, 2].map((p) => new Set(Array.from({ length: 16 }, (_, i) => classOf(p * 16 + i + 1))));
    for (const pool of pools) expect(pool.size).toBe(1);
    expect(new Set(pools.map((p) => [...p][0])).size).toBe(3);
    // The first pool keeps the records' own class.
    expect(classOf(1)).toBe("bfloat16/auto");
    const roles = Array.from({ length: 16 }, (_, i) => launch.engines[`engine-${17 + i}`]!.role);
    expect(roles.filter((r) => r === "prefill").length).toBe(8);
  });

  it("refuses a pool that does not divide the fleet, and more pools than classes", async () => {
    const dir = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "fleet-gen-")), "d");
    await expect(generateDesired(dir, { engines: 40, pool: 16 })).rejects.toThrow(/divides the 40 engines/);
    await expect(generateDesired(dir, { engines: 30, pool: 2 })).rejects.toThrow(/15 pools, at most 12/);
  });
});
