// `narwhal engine <action>` with the container backend on a real Docker Engine
// (through the recording/fault proxy): a temporary sizing container, runtime
// inspections in temporary containers, a serving container's cache, shared
// startup with container identity and GPU readings, and a failed shared start
// whose container removal fails (injected 500 on DELETE /containers/...).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { startDockerProxy, type DockerProxy } from "../docker/docker-proxy.js";
import { dockerClient } from "../docker/sim-image.mjs";
import { engineFleet, readJson, SHARED_GPU, type EngineFleet } from "../e2e/engine-fleet.js";

describe("narwhal engine on the container backend", () => {
  const docker = dockerClient(inject("dockerHost"));
  let proxy: DockerProxy;
  let f: EngineFleet;
  const run: Record<string, string> = {};
  const env = () => ({ DOCKER_HOST: proxy.host });
  const ours = async () => docker.listContainers({ all: true, filters: { label: [`io.narwhal.state=${f.stateDir}`] } });
  const removeAll = async () => {
    for (const c of await ours()) await docker.getContainer(c.Id).remove({ force: true });
  };
  const ok = (r: { code: number | null; stdout: string; stderr: string }) => {
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    proxy = await startDockerProxy(inject("dockerHost"));
    f = await engineFleet({ container: { image: inject("simImage") } });
    run.measure = await f.prepared("c1-measure", "engine-1", env());
    run.serve = await f.prepared("c1-serve", "engine-1", env());
    run.s1 = await f.prepared("c1-shared", "engine-1", env());
    run.s2 = await f.prepared("c2-shared", "engine-2", env());
    // One group (same runtime environment); the simulator crashes only engine-2.
    const crash2 = { ...env(), NARWHAL_ENGINE_ENV: '{"NARWHAL_SIM_FAULTS":"crash_at_start@engine-2"}' };
    run.f1 = await f.prepared("c1-fail", "engine-1", crash2);
    run.f2 = await f.prepared("c2-fail", "engine-2", crash2);
  });
  afterAll(async () => {
    await removeAll();
    await proxy.close();
  });

  it("measure-cache sizes the cache in a temporary container and removes it; inspections run in the image", async () => {
    const measured = ok(await f.engine(["measure-cache", "--run", run.measure!], env()));
    const layout = await readJson(path.join(run.measure!, "cache-layout.json"));
    expect(layout).toMatchObject({
      engine: "engine-1",
      block_size: 16,
      tensor_parallel_size: 1,
      plan_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(measured.details.sizing.container_id).toBe(layout.handle.container_id);
    expect(await ours()).toEqual([]); // the sizing container and every inspection container are gone
    expect(await fs.readFile(path.join(run.measure!, "engine.log"), "utf8")).toMatch(
      /GPU KV cache size: [\d,]+ tokens/,
    );

    const dims = ok(await f.engine(["model-dimensions", "--run", run.measure!], env()));
    expect(dims.details).toMatchObject({
      num_hidden_layers: 4,
      num_kv_heads: 2,
      head_size: 64,
      dtype: "bfloat16",
      config_source: "/model",
      runtime_identity: inject("simImageId"),
    });
    const policy = ok(await f.engine(["handshake-policy", "--run", run.measure!], env()));
    // vLLM's compatibility factors (src/phases/nixl-compat.ts), from what the image's worker reports.
    expect(policy.details.compatibility).toMatchObject({
      vllm_version: "0.11.0",
      nixl_connector_version: 1,
      num_hidden_layers: 4,
      num_kv_heads: 2,
      head_size: 64,
      attn_backend_name: "FLASH_ATTN",
    });
    expect(policy.details.compatibility_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(await ours()).toEqual([]);
  });

  it("start records container.id; capture-cache and cache-registration read the live container", async () => {
    const started = ok(await f.engine(["start", "--run", run.serve!], env()));
    const id = (await fs.readFile(path.join(run.serve!, "container.id"), "utf8")).trim();
    expect(started.details.handle.container_id).toBe(id);
    expect(started.details.process).toMatchObject({
      container_id: id,
      image_id: inject("simImageId"),
      pid: expect.any(Number),
    });
    const captured = ok(await f.engine(["capture-cache", "--run", run.serve!], env()));
    expect(captured.details.layout).toMatchObject({
      block_size: 16,
      group_signature: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    const registered = ok(
      await f.engine(
        ["cache-registration", "--run", run.serve!, "--runtime-layout", path.join(run.serve!, "cache-layout.json")],
        env(),
      ),
    );
    expect(registered.details).toMatchObject({
      source: { kind: "runtime-layout" },
      layout: { num_gpu_blocks: captured.details.layout.num_gpu_blocks },
      registration: [{ kind: "full_attention", layers: 4, page_size_bytes: 8192 }],
    });
    const again = await f.engine(["capture-cache", "--run", run.serve!], env());
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/cache-layout.json already exists/);
    await removeAll();
  });

  it("start-shared starts two containers on one GPU and records container identity and readings", async () => {
    const r = ok(await f.engine(["start-shared", "--run", run.s1!, "--run", run.s2!], env()));
    expect(r.details.budget).toMatchObject({ gpu_uuid: SHARED_GPU, sum: "0.3" });
    for (const [dir, order] of [
      [run.s1!, 1],
      [run.s2!, 2],
    ] as const) {
      const rec = await readJson(path.join(dir, "shared-start.json"));
      const id = (await fs.readFile(path.join(dir, "container.id"), "utf8")).trim();
      expect(rec).toMatchObject({
        status: "ready",
        backend: "container",
        launch_order: order,
        identity: {
          process: {
            container_id: id,
            image_id: inject("simImageId"),
            pid: expect.any(Number),
            args: expect.arrayContaining(["--gpu-memory-utilization"]),
          },
        },
      });
    }
    expect((await readJson(path.join(run.s2!, "shared-start.json"))).increase_mib).toEqual({
      engine: 16311,
      aggregate: 24466,
    });
    await removeAll();
  });

  it("a failed shared start removes its containers in reverse order and reports the removal that failed", async () => {
    // Armed by engine-2's own create: the runtime device queries before the launch remove their check containers too.
    proxy.rules.push({
      method: "DELETE",
      path: /^\/containers\/[0-9a-f]{64}\?/,
      action: "error500",
      times: 1,
      armedBy: /^\/containers\/create\?name=narwhal-engine-2(&|$)/,
    });
    try {
      const r = await f.engine(["start-shared", "--run", run.f1!, "--run", run.f2!], env());
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/shared startup failed at engine-2/);
      expect(r.stderr).toMatch(/Cleanup errors: engine-2 \(container [0-9a-f]{64}\): .*injected fault/);
      const [a, b] = [
        await readJson(path.join(run.f1!, "shared-start.json")),
        await readJson(path.join(run.f2!, "shared-start.json")),
      ];
      const leftId = (await fs.readFile(path.join(run.f2!, "container.id"), "utf8")).trim();
      expect(b).toMatchObject({
        status: "failed",
        cleanup_status: "failed",
        cleanup_error: expect.stringMatching(/injected fault/),
        cause: expect.stringMatching(/out of memory/i),
        handle: { container_id: leftId },
      });
      expect(a).toMatchObject({ status: "failed", cleanup_status: "removed" });
      // Only the container whose removal failed is left, with its id in the run directory.
      const left = await ours();
      expect(left.map((c) => c.Id)).toEqual([leftId]);
    } finally {
      proxy.rules.length = 0;
      await removeAll();
    }
  });
});
