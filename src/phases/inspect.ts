// The inspect step (seed 000, "Inspect every engine host" and "Before launching
// an engine, verify local artifacts and planned listeners"): observe the
// engine's host, check it against the engine spec, and return the observation
// as data — or one error listing every problem found. Safe to run any number
// of times: it only reads files, runs read-only tools and binds-then-closes ports.
// Everything is read on the engine's own node through `host`: for a remote
// node nothing is read from the controller's machine.

import { groupSignature } from "../desired/hash.js";
import type { EngineSpec } from "../desired/types.js";
import { CancelledError } from "../errors.js";
import type { HostAccess } from "../hosts/types.js";
import { checkDevices, declaredDevices } from "./host/devices.js";
import { observeFabric } from "./host/fabric.js";
import { checkPlannedPorts, plannedPorts, type PlannedPortCheck } from "./host/ports.js";
import { DEFAULT_TOOL_TIMEOUT_MS } from "./host/run-tool.js";
import { observeGpus } from "./inspect-gpus.js";
import { observeModel } from "./inspect-model.js";
import { checkpointDisagreement, type CheckpointObservation } from "./checkpoint-agreement.js";
import { InspectionError, problemFromError, type InspectionProblem } from "./inspect-problems.js";
import type { Inspection } from "./types.js";
import type { ProgressSink } from "./progress.js";

export interface InspectOptions {
  signal: AbortSignal;
  /** The engine's node (NodeHosts.access(spec.node)): where every reading is taken. */
  host: HostAccess;
  /** Image id of the engine's runtime (container image id or "native:<sha256>"), for the group signature. */
  imageId: string;
  /** Ports held by this engine's own previous process; not reported as busy. */
  ignorePorts?: number[];
  /** Deadline for nvidia-smi / rocminfo / ip; default DEFAULT_TOOL_TIMEOUT_MS. */
  toolTimeoutMs?: number;
  /** Directory on the node for the model manifest's digest cache (NodeHosts.manifestCacheDir); none: no cache. */
  manifestCacheDir?: string;
  /** Told how far the model manifest's hashing has come, for the operator's view. */
  waits?: ProgressSink;
  /**
   * What the other engines' recorded inspections observed of their checkpoints. Asked once the
   * manifest is known, and answered from the controller's memory without an await in between, so of
   * two engines inspected at once the second to finish sees the first.
   */
  checkpointPeers?: () => readonly CheckpointObservation[];
}

function portProblems(ports: PlannedPortCheck[]): InspectionProblem[] {
  const problems: InspectionProblem[] = [];
  for (const p of ports) {
    if (p.error) {
      problems.push(problemFromError(p.error, p.input));
    } else if (!p.free) {
      problems.push({
        message: `port ${p.port} (${p.purpose}) already has a listener; an existing listener blocks launch until ownership is resolved`,
        input: p.input,
        fix: `Find the owner with \`ss -ltnp 'sport = :${p.port}'\` and stop it, or plan another ${p.purpose} port.`,
        // A stranger's listener is not narwhal's to stop: outwaited, re-checked until it is gone.
        failure: "outwait",
      });
    }
  }
  return problems;
}

export async function inspect(spec: EngineSpec, opts: InspectOptions): Promise<Inspection> {
  const what = `inspection of ${spec.name}`;
  if (opts.signal.aborted) throw new CancelledError(what);
  const { host } = opts;
  const tool = { signal: opts.signal, timeoutMs: opts.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS };
  // Each probe reports into its own list; the problems are listed in the order
  // gpu, devices, ports, fabric, model.
  const gpuProblems: InspectionProblem[] = [];
  const portFailures: InspectionProblem[] = [];
  const fabricProblems: InspectionProblem[] = [];
  const modelProblems: InspectionProblem[] = [];

  // The probes are independent but run one after another: on a remote node each
  // reading is a session on the node's one ssh connection, and sshd allows ten
  // at a time (MaxSessions), which several engines of one node inspecting at
  // once would otherwise exceed. The slowest probe (nvidia-smi) dominates anyway.
  const gpu = await observeGpus(host, spec, tool, gpuProblems);
  const devices = await checkDevices(
    host,
    spec.node.dev_root,
    declaredDevices(spec.launch.accelerator_devices, spec.launch.transfer.devices),
  );
  const ports = await checkPlannedPorts(
    host,
    spec.host,
    plannedPorts(spec),
    new Set(opts.ignorePorts ?? []),
    opts.signal,
  ).catch((err: unknown) => {
    // The listener table or the bind test could not be read at all: one problem, no port is known free.
    portFailures.push(problemFromError(err, `node ${host.node} listeners`));
    return [];
  });
  const fabric = await observeFabric(host, spec, tool, fabricProblems);
  const model = await observeModel(host, spec, modelProblems, opts);
  if (opts.signal.aborted) throw new CancelledError(what);

  const problems = [...gpuProblems];
  for (const d of devices.filter((d) => !d.present)) {
    problems.push({
      message: `device ${d.path} is missing on node ${host.node} (looked for ${d.checked}; node.dev_root is "${spec.node.dev_root}")`,
      input: d.input,
      fix: "Restore the declared device exposure before launch.",
      // Devices come and go with drivers and hot-plug: outwaited, re-checked until the path exists.
      failure: "outwait",
    });
  }
  problems.push(...portFailures, ...portProblems(ports), ...fabricProblems, ...modelProblems);

  const modelSha = model.config_sha256;
  if (modelSha !== undefined && modelSha !== spec.model.config_sha256) {
    problems.push({
      message: `sha256 of ${spec.model.dir}/config.json on node ${host.node} is ${modelSha}, but model.config_sha256 expects ${spec.model.config_sha256}`,
      input: "model.config_sha256 (NARWHAL_MODEL_CONFIG_SHA256) / model.dir (NARWHAL_MODEL_DIR)",
      fix: "Rerun discovery after changing the provisioned checkpoint, or restore the checkpoint discovery recorded.",
      failure: "terminal",
    });
  }

  const manifest = model.manifest;
  const pin = spec.model.tree_sha256;
  if (manifest && pin !== undefined && manifest.tree_sha256 !== pin) {
    problems.push({
      message: `tree digest of ${spec.model.dir} on node ${host.node} is ${manifest.tree_sha256} (${manifest.files.length} files), but model.tree_sha256 expects ${pin}`,
      input: "model.tree_sha256 (NARWHAL_MODEL_TREE_SHA256) / model.dir (NARWHAL_MODEL_DIR)",
      fix: "Rerun discovery after changing the provisioned checkpoint, or restore the checkpoint discovery recorded.",
      failure: "terminal",
    });
  }
  if (manifest && modelSha !== undefined && pin === undefined) {
    const mine = {
      engine: spec.name,
      node: spec.node.name,
      model_dir: spec.model.dir,
      config_sha256: modelSha,
      tree_sha256: manifest.tree_sha256,
    };
    const disagreement = checkpointDisagreement(mine, opts.checkpointPeers?.() ?? []);
    if (disagreement) problems.push(disagreement);
  }

  if (problems.length > 0 || modelSha === undefined || !manifest) throw new InspectionError(spec.name, problems);

  return {
    engine: spec.name,
    node: spec.node.name,
    inspected_at: new Date().toISOString(),
    vendors: gpu.vendors,
    accelerator: gpu.accelerator,
    physical_gpu_count: gpu.gpus.length,
    gpus: gpu.gpus,
    selected: gpu.selected,
    devices: devices.map((d) => ({ path: d.path, present: d.present })),
    ports: ports.map((p) => ({ port: p.port, purpose: p.purpose, free: p.free })),
    model_config_sha256: modelSha,
    model_meta: model.meta,
    model_file_sha256: model.file_sha256,
    // Not in the group signature (seed-exact): an invariant of it instead, kept by checkpointDisagreement.
    model_tree_sha256: manifest.tree_sha256,
    model_manifest: manifest,
    fabric,
    image_id: opts.imageId,
    group_signature: groupSignature({
      image_id: opts.imageId,
      model_config_sha256: modelSha,
      accelerator: spec.launch.accelerator,
      tensor_parallel_size: spec.launch.tensor_parallel_size,
      gpu_visibility_env: spec.launch.gpu_visibility_env,
      runtime: spec.launch.runtime,
      transport: spec.launch.transfer.transport,
    }),
    tool_output: gpu.tool_output,
  };
}
