// What `narwhal suspend|resume|retry` does to a real state directory, both ways it arrives: applied
// by the controller that holds the lock (applyRequest: the actors are told of a suspension before
// anything is planned, so a backoff timer cannot run first), and by the command itself with no
// controller. A retry of a suspended engine is refused either way, naming resume.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStores } from "../state/open-stores.js";
import { applyRequest, type RequestTarget } from "../../src/controller/operator-requests.js";
import { operatorRequest } from "../../src/cli/suspend.js";
import { loadConfig } from "../../src/config.js";
import { EXIT } from "../../src/cli/exit-codes.js";
import { record } from "./records.js";

const stores = openStores();
let root: string;
let stateDir: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "narwhal-requests-"));
  stateDir = path.join(root, "state");
});
afterEach(async () => {
  await stores.closeAll();
  await rm(root, { recursive: true, force: true });
});

/** A controller's side of a request over a real store; `said` records what it was told, in order. */
async function target(actor: { phase: string; terminal: boolean }) {
  const store = await stores.open(stateDir);
  await store.update("engine-1", () => record("engine-1", { phase: actor.phase }));
  const said: string[] = [];
  const t: RequestTarget = {
    store,
    known: () => ["engine-1"],
    actor: () => actor,
    retries: new Set(),
    suspensionChanged: () => said.push(`actors told: ${Object.keys(store.suspended()).join(",") || "none"}`),
    replan: async () => {
      said.push("replanned");
    },
  };
  return { t, said };
}

describe("operator requests in the controller", () => {
  it("suspend and resume tell the engine actors what the state now records before the fleet is planned", async () => {
    const { t, said } = await target({ phase: "failed", terminal: false });
    const suspended = await applyRequest(t, { id: "1", at: "", kind: "suspend", engines: ["engine-1"], all: false });
    expect(suspended).toEqual([expect.objectContaining({ engine: "engine-1", ok: true })]);
    await applyRequest(t, { id: "2", at: "", kind: "resume", engines: ["engine-1"], all: false });
    expect(said).toEqual(["actors told: engine-1", "replanned", "actors told: none", "replanned"]);
  });

  it("refuses a retry of a suspended engine, naming resume, and plans nothing for it", async () => {
    const { t, said } = await target({ phase: "failed", terminal: true });
    await t.store.setSuspended(["engine-1"], true);
    const [r] = await applyRequest(t, { id: "1", at: "", kind: "retry", engines: ["engine-1"], all: false });
    expect(r).toMatchObject({ engine: "engine-1", ok: false });
    expect(r!.message).toMatch(
      /^suspended since .*: nothing is retried while suspended; narwhal resume engine-1 first/,
    );
    expect([...t.retries]).toEqual([]);
    expect(said).toEqual([]);
  });
});

describe("narwhal retry with no controller running", () => {
  it("refuses a suspended engine with exit 1 naming resume, and accepts one that is not", async () => {
    const store = await stores.open(stateDir);
    await store.update("engine-1", () => record("engine-1", { phase: "failed" }));
    await store.update("engine-2", () => record("engine-2", { phase: "failed" }));
    await store.setSuspended(["engine-1"], true);
    const config = loadConfig({ state: stateDir, desired: path.join(root, "desired") }, {});
    const lines: string[] = [];
    const opts = { all: false, timeoutMs: 1000, format: "text" };
    const refused = await operatorRequest(config, "retry", { ...opts, engines: ["engine-1"] }, (s) => lines.push(s));
    expect(refused).toBe(EXIT.invalid);
    expect(lines.join("\n")).toContain("engine-1: suspended since");
    expect(lines.join("\n")).toContain("narwhal resume engine-1 first");
    const accepted = await operatorRequest(config, "retry", { ...opts, engines: ["engine-2"] }, (s) => lines.push(s));
    expect(accepted).toBe(EXIT.ok);
  });
});
