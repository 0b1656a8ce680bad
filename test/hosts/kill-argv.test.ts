// kill(1) of a process group must end its options with "--": procps-ng 4 reads `kill -9 -192` (and
// `kill -s KILL -192`) as pid -1 and sends SIGKILL to every process on the machine. The host contract test
// once did, on the rig, and took the whole test run and the shell around it down. Every argv in src/ and
// test/ that signals a negative pid through kill(1) is checked here.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.(ts|mjs)$/.test(e.name) ? [p] : [];
  });
}

/** `["kill", ..., `-${x}`]` argv literals whose group operand has no "--" before it. */
function unsafeGroupKills(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/\[\s*"kill"\s*,([^\]]*)\]/g)) {
    const args = m[1]!;
    const group = args.search(/`-\$\{/);
    if (group >= 0 && !args.slice(0, group).includes('"--"')) found.push(m[0]);
  }
  return found;
}

describe("kill(1) of a process group", () => {
  it("the check finds an argv without -- and passes one with it", () => {
    expect(unsafeGroupKills('host.run(["kill", "-9", `-${pid}`])')).toHaveLength(1);
    expect(unsafeGroupKills('host.run(["kill", "-s", sig, `-${pgid}`])')).toHaveLength(1);
    expect(unsafeGroupKills('host.run(["kill", "-s", "KILL", "--", `-${pid}`])')).toEqual([]);
    expect(unsafeGroupKills('host.run(["kill", String(pid)])')).toEqual([]);
  });

  it('every one in src/ and test/ ends its options with "--"', () => {
    const bad = [...sources(path.join(ROOT, "src")), ...sources(path.join(ROOT, "test"))]
      .filter((f) => !f.endsWith("kill-argv.test.ts"))
      .flatMap((f) => unsafeGroupKills(fs.readFileSync(f, "utf8")).map((k) => `${path.relative(ROOT, f)}: ${k}`));
    expect(bad).toEqual([]);
  });
});
