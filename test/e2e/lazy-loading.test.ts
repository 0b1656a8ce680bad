// A command loads what it runs (issue 14 item 1): `--help` and `validate` or `status` of a native fleet
// never load dockerode (a third of a second of CPU), the controller (xstate) or the engine actions. The
// built CLI runs as a real process under a preload (test/fixtures/load-recorder) that records every
// module file it loads, ESM and CommonJS; a positive control proves the recorder sees dockerode when the CLI
// does load it (an image tag to look up on a TLS endpoint), so an empty finding is not a blind recorder. The CLI itself is one
// file (dist/bundle/cli.cjs, scripts/bundle.mjs) in which esbuild wraps each module reached through a dynamic
// import in a function named after its source file, called when it is imported: V8's coverage of that file
// (NODE_V8_COVERAGE) says which were called, and every module not wrapped ran at start. A positive control
// (reconcile --once) proves the coverage sees the controller evaluated when it is.
import fs from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli, teardown, type CliResult } from "./cli.js";
import { freePort, REPO, simFleet } from "./sim-fleet.js";

const RECORDER = pathToFileURL(path.join(REPO, "test/fixtures/load-recorder/record.mjs")).href;

/** Run the CLI with the recorder preloaded and V8's coverage on: its result, and every module it loaded. */
async function loaded(args: string[], env: Record<string, string> = {}): Promise<CliResult & { modules: string[] }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-loads-"));
  const record = path.join(dir, "modules.txt");
  const coverage = path.join(dir, "coverage");
  const r = await runCli(args, {
    ...env,
    NODE_OPTIONS: `--import ${RECORDER}`,
    NARWHAL_TEST_LOAD_RECORD: record,
    NODE_V8_COVERAGE: coverage,
  });
  const files = (await fs.readFile(record, "utf8")).split("\n").filter(Boolean);
  const meta = await bundleMeta();
  return { ...r, modules: [...files, ...bundledSources(meta, files), ...(await evaluated(meta, coverage))] };
}

type Meta = { outputs: Record<string, { inputs: Record<string, unknown> }> };

async function bundleMeta(): Promise<Meta> {
  return JSON.parse(await fs.readFile(path.join(REPO, "dist/bundle/meta.json"), "utf8")) as Meta;
}

/** The source files (absolute) inside the bundle's files among `files` (loaded: main.js, dockerode.cjs). */
function bundledSources(meta: Meta, files: string[]): string[] {
  const outputs = new Map(
    Object.entries(meta.outputs).map(([out, o]) => [path.join(REPO, out), Object.keys(o.inputs)]),
  );
  return files
    .map((f) => (f.startsWith("file://") ? fileURLToPath(f) : f))
    .flatMap((f) => outputs.get(f) ?? [])
    .map((input) => path.join(REPO, input));
}

const CLI_BUNDLE = "dist/bundle/cli.cjs";

/**
 * The source files (absolute) of cli.cjs that ran, from V8's coverage of the run: a module esbuild wrapped
 * (its function is named after its source file) when its function was called, any other at start.
 */
async function evaluated(meta: Meta, coverageDir: string): Promise<string[]> {
  const inputs = Object.keys(meta.outputs[CLI_BUNDLE]!.inputs);
  const url = pathToFileURL(path.join(REPO, CLI_BUNDLE)).href;
  type Coverage = {
    result: Array<{ url: string; functions: Array<{ functionName: string; ranges: Array<{ count: number }> }> }>;
  };
  const scripts: Coverage["result"] = [];
  for (const f of await fs.readdir(coverageDir))
    scripts.push(
      ...(JSON.parse(await fs.readFile(path.join(coverageDir, f), "utf8")) as Coverage).result.filter(
        (s) => s.url === url,
      ),
    );
  expect(scripts.length, `V8's coverage of the run holds ${CLI_BUNDLE}`).toBeGreaterThan(0);
  const known = new Set(inputs);
  const called = new Map<string, boolean>();
  for (const s of scripts)
    for (const fn of s.functions)
      if (known.has(fn.functionName))
        called.set(fn.functionName, called.get(fn.functionName) === true || fn.ranges[0]!.count > 0);
  // The map is not empty: the wrapped modules are there to tell apart (the controller is one).
  expect(called.has("src/controller/controller.ts"), "cli.cjs wraps the controller's module").toBe(true);
  return inputs.filter((input) => called.get(input) ?? true).map((input) => path.join(REPO, input));
}

const HEAVY = [
  ["dockerode", "/node_modules/dockerode/"],
  ["xstate (the controller's machines)", "/node_modules/xstate/"],
  ["winston (the logger)", "/node_modules/winston/"],
  ["the controller", "/src/controller/controller.ts"],
  ["the engine actions", "/src/cli/engine/actions.ts"],
  ["yaml (only --format yaml prints it)", "/node_modules/yaml/"],
] as const;

/**
 * Modules that build zod schemas or engine-side steps when loaded, which a command that neither saves
 * plans, prints JSON Schemas nor runs engines does not use: a constant or a small function once drew
 * each into every command's start (plan-file-schema 12 ms, json-schema 19 ms, cache-registration 13 ms).
 */
const SCHEMAS = [
  ["the saved plan's schema", "/src/controller/plan-file-schema.ts"],
  ["the desired files' JSON Schemas", "/src/desired/json-schema.ts"],
  ["the cache-registration action", "/src/phases/cache-registration.ts"],
  ["capture", "/src/phases/capture.ts"],
] as const;

/** What observes engines (status does; --help and validate do not). */
const BACKENDS = ["the backends", "/src/backends/for-config.ts"] as const;

function expectNoneOf(modules: string[], what: string, heavy: ReadonlyArray<readonly [string, string]> = HEAVY): void {
  // The recorder itself saw the CLI's entry point: it was running.
  expect(
    modules.some((m) => m.endsWith("/dist/bundle/main.js")),
    `${what}: the recorder saw the CLI load`,
  ).toBe(true);
  // ...and the bundle's sources: what ran at start is there.
  expect(modules.some((m) => m.endsWith("/src/cli/main.ts"))).toBe(true);
  for (const [name, marker] of heavy) {
    const hit = modules.filter((m) => m.includes(marker));
    expect(hit, `${what} loaded ${name}`).toEqual([]);
  }
}

describe("a command loads what it runs", () => {
  it("--help, engine --help, and validate and status of a native fleet load neither dockerode, the controller, the engine actions nor schemas they do not use", async () => {
    const fleet = await simFleet();
    for (const [args, heavy] of [
      [["--help"], [...HEAVY, ...SCHEMAS, BACKENDS]],
      [
        ["engine", "--help"],
        [...HEAVY, ...SCHEMAS, BACKENDS],
      ],
      [
        ["validate", "--desired", fleet.dir],
        [...HEAVY, ...SCHEMAS, BACKENDS],
      ],
      [
        ["status", "--desired", fleet.dir, "--state", fleet.stateDir],
        [...HEAVY, ...SCHEMAS],
      ],
    ] as const) {
      const r = await loaded([...args]);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      expectNoneOf(r.modules, args.join(" "), heavy);
    }
  });

  it("plan and down of a native fleet observe and stop without the controller (its machines, xstate) or dockerode", async () => {
    const fleet = await simFleet();
    const notLogger = HEAVY.filter(([name]) => !name.startsWith("winston"));
    for (const [args, code] of [
      [["plan", "--desired", fleet.dir, "--state", fleet.stateDir], 2], // changes pending: nothing runs yet
      [["down", "--desired", fleet.dir, "--state", fleet.stateDir], 0],
    ] as const) {
      const r = await loaded([...args]);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(code);
      expectNoneOf(r.modules, args.join(" "), notLogger);
      // They did observe: the backends were loaded.
      expect(
        r.modules.some((m) => m.endsWith(BACKENDS[1])),
        `${args[0]} loaded the backends`,
      ).toBe(true);
    }
  });

  it("reconcile --once of a native fleet loads neither chokidar (watch mode's), prom-client (metrics') nor dockerode", async () => {
    const fleet = await simFleet();
    try {
      const r = await loaded(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
      expect(r.code, r.stderr).toBe(0);
      expectNoneOf(r.modules, "reconcile --once", [
        ["chokidar", "/node_modules/chokidar/"],
        ["prom-client", "/node_modules/prom-client/"],
        ["dockerode", "/node_modules/dockerode/"],
      ]);
      // It did run the controller: the coverage sees it.
      expect(r.modules.some((m) => m.endsWith("/src/controller/controller.ts"))).toBe(true);
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("validate looks an image tag up without dockerode, and with it on a TLS endpoint (the recorder sees it)", async () => {
    const fleet = await simFleet({ container: { image: "vllm/vllm-openai:latest" } });
    // No daemon answers there: the lookup fails fast, and the tag is reported invalid all the same.
    const socket = path.join(fleet.stateDir, "..", "no-docker.sock");
    const plain = await loaded(["validate", "--desired", fleet.dir], { DOCKER_HOST: `unix://${socket}` });
    expect(plain.code, plain.stderr).toBe(1);
    expect(plain.stderr).toContain("is a tag");
    // An image inspect is a read: narwhal's own HTTP request (src/backends/docker-reads.ts).
    expect(plain.modules.filter((m) => m.includes("dockerode"))).toEqual([]);
    // A TLS endpoint's reads stay dockerode's: loaded then, nothing listening on the port.
    const tls = await loaded(["validate", "--desired", fleet.dir], {
      DOCKER_HOST: `tcp://127.0.0.1:${await freePort()}`,
      DOCKER_TLS_VERIFY: "1",
    });
    expect(tls.code, tls.stderr).toBe(1);
    expect(tls.stderr).toContain("is a tag");
    expect(tls.modules.filter((m) => m.includes("/node_modules/dockerode/")).length).toBeGreaterThan(0);
    // ...as the bundle's own copy (scripts/bundle.mjs), without the ssh2 and gRPC stacks narwhal never calls:
    // loaded from node_modules, they were most of a container command's cost to start.
    expect(tls.modules.filter((m) => m.endsWith("/dist/bundle/dockerode.cjs")).length).toBe(1);
    for (const stack of ["/node_modules/ssh2/", "/node_modules/@grpc/", "/node_modules/protobufjs/"])
      expect(tls.modules.filter((m) => m.includes(stack))).toEqual([]);
  });

  it("the bundled dockerode says so where it would have reached a module it leaves out (docker-modem's ssh transport)", async () => {
    const Docker = createRequire(import.meta.url)(path.join(REPO, "dist/bundle/dockerode.cjs")) as new (o: object) => {
      ping(): Promise<unknown>;
    };
    // docker-modem's own ssh:// dialling (narwhal passes its OpenSSH agent and plain HTTP instead: docker-endpoint.ts).
    const docker = new Docker({ protocol: "ssh", host: "192.0.2.1", port: 22 });
    await expect(docker.ping()).rejects.toThrow("docker-modem's ssh:// transport (ssh2) is not in narwhal's bundle");
  });
});
