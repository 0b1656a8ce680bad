#!/usr/bin/env node
// `npm run demo`: converge the default desired/ (two simulated engines on the
// native backend: no Docker, no GPU) and print the status table.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cli = path.join(root, "dist/bundle/main.js");
const run = (args) => spawnSync(process.execPath, [cli, ...args], { cwd: root, stdio: "inherit" });

// reconcile --once prints the status table when it has converged.
const reconcile = run(["reconcile", "--once"]);
console.log("\nEngines keep running. Stop them with: npx narwhal down");
process.exit(reconcile.status ?? 1);
