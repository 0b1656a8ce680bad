// cache-registration (seed 001): the KV-cache regions NIXL registers, from the
// block grouping the checked runtime resolves plus exactly one layout source:
// a serving startup log with exactly one resolved KV layout, or a captured
// runtime layout (cache-layout.json from capture-cache or measure-cache).
import fs from "node:fs/promises";
import path from "node:path";
import { parseStartupLog } from "./capture.js";
import { loadCheckedRun, refuseExisting, type CheckedRun } from "./checked-run.js";
import { inspectionEnvelope, inspectRuntime, writeRunOutput, type RuntimeInspectOptions } from "./runtime-inspect.js";
import { refusal } from "./action-error.js";
import { sha256 } from "./prepare.js";
import { CACHE_REGISTRATION_ACTION, registrationSource, type RegistrationSource } from "./registration-source.js";

export const CACHE_REGISTRATION_FILE = "cache-registration.json";
const ACTION = CACHE_REGISTRATION_ACTION;

interface ResolvedLayout {
  kind: ReturnType<typeof registrationSource>["kind"];
  path: string;
  sha256: string;
  block_size: number;
  num_gpu_blocks: number;
  gpu_kv_cache_tokens: number;
  cache_dtype?: string;
  max_concurrency?: { tokens_per_request: number; factor: number };
}

interface Dimensions {
  num_hidden_layers: number;
  kv_heads_per_rank: number;
  head_size: number;
  kv_bytes_per_element: number;
  tensor_parallel_size: number;
  cache_dtype: string;
}

/** The one KV layout a serving log resolved: all its "GPU KV cache size" lines must agree. */
export function layoutFromLog(log: string, blockSize: number): { tokens: number } | { problem: string } {
  const sizes = new Set(
    [...log.matchAll(/GPU KV cache size: ([\d,]+) tokens/g)].map((m) => Number(m[1]!.replace(/,/g, ""))),
  );
  if (sizes.size !== 1) {
    return {
      problem:
        sizes.size === 0
          ? "has no resolved KV layout (no 'GPU KV cache size: N tokens' line)"
          : `resolves ${sizes.size} different KV layouts (${[...sizes].join(", ")} tokens): use the log of one serving start`,
    };
  }
  const [tokens] = [...sizes] as [number];
  if (tokens % blockSize !== 0)
    return { problem: `resolves ${tokens} tokens, not a whole number of ${blockSize}-token blocks` };
  return { tokens };
}

async function resolveLayout(
  loaded: CheckedRun,
  source: { kind: ResolvedLayout["kind"]; path: string },
  blockSize: number,
): Promise<ResolvedLayout> {
  const file = path.resolve(source.path);
  const bad = (message: string) =>
    refusal(ACTION, `${file} ${message}`, {
      engine: loaded.plan.engine,
      run: loaded.run.dir,
      input: source.kind === "startup-log" ? "--startup-log" : "--runtime-layout",
      fix: "Select the serving log or captured cache-layout.json of an engine started from a plan of this group.",
    });
  let bytes: Buffer;
  try {
    bytes = await fs.readFile(file);
  } catch (err) {
    throw bad(`cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const base = { kind: source.kind, path: file, sha256: sha256(bytes) };
  if (source.kind === "startup-log") {
    const found = layoutFromLog(bytes.toString("utf8"), blockSize);
    if ("problem" in found) throw bad(found.problem);
    const concurrency = parseStartupLog(bytes.toString("utf8")).concurrency;
    return {
      ...base,
      block_size: blockSize,
      num_gpu_blocks: found.tokens / blockSize,
      gpu_kv_cache_tokens: found.tokens,
      ...(concurrency ? { max_concurrency: concurrency } : {}),
    };
  }
  let layout: Record<string, unknown>;
  try {
    layout = JSON.parse(bytes.toString("utf8")) as Record<string, unknown>;
  } catch {
    throw bad("is not JSON");
  }
  const ints = ["block_size", "num_gpu_blocks", "gpu_kv_cache_tokens"].filter((k) => !Number.isInteger(layout[k]));
  if (ints.length) throw bad(`is not a captured cache layout: ${ints.join(", ")} missing`);
  if (layout.group_signature !== undefined && layout.group_signature !== loaded.plan.group_signature) {
    throw bad(
      `was captured in group ${String(layout.group_signature)}, this plan is in group ${loaded.plan.group_signature}`,
    );
  }
  return {
    ...base,
    block_size: layout.block_size as number,
    num_gpu_blocks: layout.num_gpu_blocks as number,
    gpu_kv_cache_tokens: layout.gpu_kv_cache_tokens as number,
    ...(typeof layout.cache_dtype === "string" ? { cache_dtype: layout.cache_dtype } : {}),
  };
}

/** Per KV-cache group: the bytes one rank registers with NIXL (K and V, every block, every layer of the group). */
export function registrationGroups(
  groups: Array<{ kind: string; layers: number[] }>,
  dims: Dimensions,
  layout: ResolvedLayout,
) {
  return groups.map((g) => {
    const attention = g.kind !== "mamba";
    const page = attention
      ? 2 * layout.block_size * dims.kv_heads_per_rank * dims.head_size * dims.kv_bytes_per_element
      : null;
    return {
      kind: g.kind,
      layers: g.layers.length,
      layer_indices: g.layers,
      block_size: layout.block_size,
      num_blocks: layout.num_gpu_blocks,
      page_size_bytes: page,
      bytes_per_layer: page === null ? null : page * layout.num_gpu_blocks,
      bytes_per_rank: page === null ? null : page * layout.num_gpu_blocks * g.layers.length,
      // One K and one V region per layer, each split into one descriptor per block.
      descriptors_per_rank: attention ? 2 * g.layers.length * layout.num_gpu_blocks : null,
    };
  });
}

export async function cacheRegistration(
  dir: string,
  source: RegistrationSource,
  opts: RuntimeInspectOptions,
): Promise<{ file: string; content: Record<string, unknown> }> {
  const chosen = registrationSource(source);
  const loaded = await loadCheckedRun(ACTION, dir);
  await refuseExisting(ACTION, loaded, [CACHE_REGISTRATION_FILE]);
  const inspection = await inspectRuntime(ACTION, loaded, "block-grouping", opts);
  const { groups, dimensions } = inspection.result as unknown as {
    groups: Array<{ kind: string; layers: number[]; block_size: number }>;
    dimensions: Dimensions & { block_size: number };
  };
  const layout = await resolveLayout(loaded, chosen, dimensions.block_size);
  if (layout.block_size !== dimensions.block_size) {
    throw refusal(
      ACTION,
      `${layout.path} uses ${layout.block_size}-token blocks, the checked runtime resolves ${dimensions.block_size}`,
      {
        engine: loaded.plan.engine,
        run: loaded.run.dir,
        input: "--runtime-layout",
        fix: "Select the layout of an engine of this plan's group.",
      },
    );
  }
  const registered = registrationGroups(groups, dimensions, layout);
  const content = {
    ...inspectionEnvelope("narwhal.cache-registration/v1", loaded, inspection),
    group_signature: loaded.plan.group_signature,
    source: { kind: layout.kind, path: layout.path, sha256: layout.sha256 },
    layout: {
      block_size: layout.block_size,
      num_gpu_blocks: layout.num_gpu_blocks,
      gpu_kv_cache_tokens: layout.gpu_kv_cache_tokens,
      cache_dtype: layout.cache_dtype ?? dimensions.cache_dtype,
      ...(layout.max_concurrency ? { max_concurrency: layout.max_concurrency } : {}),
    },
    dimensions,
    block_grouping: groups,
    registration: registered,
    bytes_per_rank: registered.reduce((sum, g) => sum + (g.bytes_per_rank ?? 0), 0),
    tensor_parallel_size: dimensions.tensor_parallel_size,
  };
  return { file: await writeRunOutput(ACTION, loaded, CACHE_REGISTRATION_FILE, content), content };
}
