// globalSetup of the projects that run the built CLI as a process (e2e, rig, campaign, docker): the
// bundle (dist/bundle, scripts/bundle.mjs) must hold the sources as they are now. A stale bundle would
// test yesterday's code and pass; `npx tsc` alone does not rebuild it, so this says so up front.
import fs from "node:fs";
import path from "node:path";
import { REPO } from "./e2e/sim-fleet.js";

export default function bundleIsFresh(): void {
  const main = path.join(REPO, "dist/bundle/main.js");
  const metaFile = path.join(REPO, "dist/bundle/meta.json");
  if (!fs.existsSync(main) || !fs.existsSync(metaFile))
    throw new Error(
      `no CLI bundle at ${main}: run \`npm run build\` (tsc, then scripts/bundle.mjs) before these tests`,
    );
  const built = fs.statSync(main).mtimeMs;
  const meta = JSON.parse(fs.readFileSync(metaFile, "utf8")) as { inputs: Record<string, unknown> };
  const stale = Object.keys(meta.inputs)
    .filter((input) => !input.startsWith("node_modules/"))
    .filter((input) => !fs.existsSync(path.join(REPO, input)) || fs.statSync(path.join(REPO, input)).mtimeMs > built);
  if (stale.length > 0)
    throw new Error(
      `the CLI bundle ${main} is older than ${stale.slice(0, 5).join(", ")}${stale.length > 5 ? ` and ${stale.length - 5} more` : ""}: run \`npm run build\` (or \`node scripts/bundle.mjs\`) before these tests`,
    );
}
