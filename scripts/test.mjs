#!/usr/bin/env node
// `npm test`: the checks first, side by side (lint, format, and the build followed by the tests' type
// check: 35 + 18 + 35 s one after another on two cores), then the unit project (fast, every
// core), then two lanes side by side: the e2e project (real processes) followed by the
// native kill-point campaign, and the docker project (a real Docker Engine). Each runs its
// files one at a time, and their time is mostly spent waiting on engines and daemons, so
// two lanes run them in about half the wall time on two cores (one vitest process ran all
// files one after another: its wall time was the sum of the files' times). Output lines are prefixed with the project; the exit code
// is the first failure's.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { directPythonEnv } from "./direct-python.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const vitest = path.join(root, "node_modules/vitest/vitest.mjs");

// vitest's closing "Tests  2 failed | 110 passed (112)", colours stripped: summed into one plain line.
const totals = { passed: 0, failed: 0 };
function count(line) {
  const m = /^\s*Tests\s+(?:(\d+) failed \| )?(\d+) passed/.exec(line.replace(/\x1b\[[0-9;]*m/g, ""));
  if (m) {
    totals.failed += Number(m[1] ?? 0);
    totals.passed += Number(m[2]);
  }
}

/** Run a command, its output lines prefixed with `label`; resolves to its exit code. */
function run(label, command, args, env = process.env) {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const [stream, sink] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ]) {
      const emit = (line) => {
        count(line);
        sink.write(`[${label}] ${line}\n`);
      };
      let rest = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk) => {
        const lines = (rest + chunk).split("\n");
        rest = lines.pop();
        lines.forEach(emit);
      });
      stream.on("end", () => rest && emit(rest));
    }
    child.on("close", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const project = (name) => run(name, process.execPath, [vitest, "run", "--project", name], testEnv.env);

const checks = await Promise.all([
  run("lint", npm, ["run", "--silent", "lint"]),
  run("format", npm, ["run", "--silent", "format:check"]),
  run("build", npm, ["run", "--silent", "build"]).then((c) =>
    c === 0 ? run("typecheck", npm, ["run", "--silent", "typecheck"]) : c,
  ),
]);
const checkFailed = checks.find((c) => c !== 0);
if (checkFailed !== undefined) {
  console.log(`checks failed (lint, format, build, typecheck: exit ${checks.join(", ")}): no tests run`);
  process.exit(checkFailed);
}

const testEnv = directPythonEnv();
if (testEnv.python) console.log(`python3 for the tests: ${testEnv.python} (PATH's python3 is a shim)`);
const unit = await project("unit");
// Two lanes, not three: a third lane beside them only made every lane slower on two cores.
// The rig project (network-namespace hosts with their own sshd and dockerd) follows the e2e
// project, and the native kill-point campaign the docker project: the lanes' sums were measured
// closest that way (e2e 540 s + rig 120 s beside docker 395 s + campaign 211 s on a clean clone;
// with KV proofs e2e 655 s + rig 106 s beside docker 438 s + campaign 237 s, so the campaign
// project also runs the KV acceptance file, see vitest.config.ts).
// The rig's engines live in their own network namespaces and its subnets are claimed, so it shares
// nothing with the other lane but the cores.
const [[e2e, rig], [docker, campaign]] = await Promise.all([
  project("e2e").then(async (e2e) => [e2e, await project("rig")]),
  project("docker").then(async (docker) => [docker, await project("campaign")]),
]);
testEnv.cleanup();
const codes = { unit, e2e, campaign, docker, rig };
console.log(`tests: ${totals.passed} passed, ${totals.failed} failed`);
console.log(
  `test projects: ${Object.entries(codes)
    .map(([p, c]) => `${p} ${c === 0 ? "passed" : `failed (exit ${c})`}`)
    .join(", ")}`,
);
process.exitCode = [unit, e2e, campaign, docker, rig].find((c) => c !== 0) ?? 0;
