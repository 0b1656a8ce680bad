// Remote model code is the operator's choice (seed 003): inspection on the engine's node compares
// the operator's --trust-remote-code with the checkpoint's auto_map and refuses a disagreement,
// naming the engine, the node, runtime.extra_args and the fix. A container's --tokenizer /
// --hf-config-path resolve in the image and its mounts (seed 000): /model is the host's model
// directory, read here; a path elsewhere in the image is left to the container check.
import { cp, mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import { metadataPath, observeModel } from "../../src/phases/inspect-model.js";
import type { InspectionProblem } from "../../src/phases/inspect-problems.js";
import { packageRoot } from "../../src/app.js";
import { buildLaunchPlan } from "../../src/phases/plan.js";
import { engineSpec, launchRecord, planInputs, withRuntime } from "./plan-fixtures.js";

const host = new LocalHost("node-1", { PATH: "/usr/local/bin:/usr/bin:/bin" });
const SIM_MODELS = path.join(packageRoot(), "test/sim/models");

let tmp: string;
let plainDir: string;
let remoteDir: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), "narwhal-remote-code-"));
  plainDir = path.join(tmp, "tiny-llama");
  remoteDir = path.join(tmp, "tiny-remote-code");
  await cp(path.join(SIM_MODELS, "tiny-llama"), plainDir, { recursive: true });
  await cp(path.join(SIM_MODELS, "tiny-remote-code"), remoteDir, { recursive: true });
  // A plain checkpoint whose separate tokenizer (a subdirectory, mounted with it) carries custom code.
  await mkdir(path.join(plainDir, "custom-tok"));
  await writeFile(
    path.join(plainDir, "custom-tok", "tokenizer_config.json"),
    JSON.stringify({ auto_map: { AutoTokenizer: ["tok.Tok", null] } }),
  );
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

function spec(backend: "native" | "container", dir: string, extra: string[]) {
  const s = engineSpec({
    backend,
    launch: launchRecord({ backend, ...(backend === "native" ? { image: undefined } : {}) }),
  });
  return withRuntime({ ...s, model: { ...s.model, dir } }, { extra_args: extra });
}

async function observe(s: ReturnType<typeof spec>) {
  const problems: InspectionProblem[] = [];
  const obs = await observeModel(host, s, problems, { signal: new AbortController().signal });
  return { meta: obs.meta, problems };
}

describe("--trust-remote-code is an operator opt-in checked against the checkpoint's auto_map", () => {
  it("auto_map without the opt-in: a terminal problem naming the engine, node, auto_map file and the line to add", async () => {
    const { problems } = await observe(spec("native", remoteDir, []));
    expect(problems).toEqual([
      {
        message: `engine-1: ${path.join(remoteDir, "config.json")}, ${path.join(remoteDir, "tokenizer_config.json")} on node node-1 declare(s) an auto_map, so loading this checkpoint runs its own Python code, and runtime.extra_args does not opt in with --trust-remote-code`,
        input: "runtime.extra_args",
        fix: expect.stringContaining(`add "--trust-remote-code" to engine-1's runtime.extra_args`),
        failure: "terminal",
      },
    ]);
  });

  it("reads config.json once for its digest and its auto_map (each read is a command on a remote node)", async () => {
    // A real local host that notes the files it is asked to read.
    class NotingHost extends LocalHost {
      readonly reads: string[] = [];
      override readFile(file: string, opts?: { maxBytes?: number }): Promise<Buffer> {
        this.reads.push(file);
        return super.readFile(file, opts);
      }
    }
    const noting = new NotingHost("node-1", { PATH: "/usr/local/bin:/usr/bin:/bin" });
    const problems: InspectionProblem[] = [];
    const obs = await observeModel(noting, spec("native", remoteDir, []), problems, {
      signal: new AbortController().signal,
    });
    expect(obs.meta.auto_map_sources).toEqual([
      path.join(remoteDir, "config.json"),
      path.join(remoteDir, "tokenizer_config.json"),
    ]);
    expect(obs.config_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(noting.reads.filter((f) => f === path.join(remoteDir, "config.json"))).toHaveLength(1);
  });

  it("the opt-in without an auto_map: a terminal problem telling the operator to remove it", async () => {
    const { problems } = await observe(spec("native", plainDir, ["--trust-remote-code"]));
    expect(problems).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/^engine-1: runtime.extra_args passes --trust-remote-code but neither/),
        input: "runtime.extra_args",
        fix: expect.stringContaining("Remove --trust-remote-code"),
        failure: "terminal",
      }),
    ]);
  });

  it("auto_map and the opt-in: no problem, and the plan's trust_remote_code (the check's setting) is true", async () => {
    const s = spec("native", remoteDir, ["--trust-remote-code"]);
    const { meta, problems } = await observe(s);
    expect(problems).toEqual([]);
    const { plan } = buildLaunchPlan(planInputs({ spec: s, meta }));
    expect(plan.model.trust_remote_code).toBe(true);
    expect(plan.command.filter((a) => a === "--trust-remote-code")).toHaveLength(1);
  });
});

describe("a container's --tokenizer resolves in the image and its mounts", () => {
  it("maps /model (and a host path under model.dir) to the host's model dir, and anything else to the image", () => {
    const s = spec("container", "/srv/models/m/", []);
    expect(metadataPath(s, "/model")).toBe("/srv/models/m");
    expect(metadataPath(s, "/model/tok")).toBe("/srv/models/m/tok");
    expect(metadataPath(s, "/srv/models/m/tok")).toBe("/srv/models/m/tok");
    expect(metadataPath(s, "/models-elsewhere/tok")).toBeNull();
    expect(metadataPath(s, "/srv/models/m2")).toBeNull();
    expect(metadataPath(s, undefined)).toBeUndefined();
    // A native engine reads its paths on the host as written.
    expect(metadataPath(spec("native", "/srv/models/m", []), "/model/tok")).toBe("/model/tok");
  });

  it("a /model tokenizer with an auto_map is read from the host's model dir, as a native one is", async () => {
    for (const [backend, tok] of [
      ["container", "/model/custom-tok"],
      ["native", path.join(plainDir, "custom-tok")],
    ] as const) {
      const { meta, problems } = await observe(spec(backend, plainDir, ["--tokenizer", tok]));
      expect(meta.auto_map_sources, backend).toEqual([path.join(plainDir, "custom-tok", "tokenizer_config.json")]);
      expect(
        problems.map((p) => p.input),
        backend,
      ).toEqual(["runtime.extra_args"]);
    }
  });

  it("a tokenizer inside the image is not read on the host: the opt-in stands for the container check to verify", async () => {
    const { meta, problems } = await observe(
      spec("container", plainDir, ["--tokenizer", "/opt/tokenizers/custom", "--trust-remote-code"]),
    );
    expect(meta).toMatchObject({ auto_map: false, in_image: ["--tokenizer"] });
    expect(problems).toEqual([]);
  });
});
