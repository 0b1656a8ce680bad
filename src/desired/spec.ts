// Builds the resolved EngineSpec of every engine from validated inputs. Runs
// only after the rules passed, so it may rely on pairing, parseable URLs and
// valid ports; it still throws (an internal error) if that is ever untrue.

import { isAbsolute, posix, resolve } from "node:path";
import { nixlPortOf, pairEngines, transferPortsOf, type EnginePair } from "./engine-pairs.js";
import { canonicalJson, inputHash } from "./hash.js";
import { derivedLaunchFields } from "./rules-record.js";
import type { EngineLaunchFile, FleetFile, FleetNode } from "./schemas.js";
import { Secret, type EngineSpec, type LaunchRecord, type NodeSpec } from "./types.js";
import { parseEndpoint, type Endpoint } from "./urls.js";
import { DEFAULT_WORK_DIR, sshDockerHost } from "./node-host.js";
import type { LauncherIdentity } from "../launcher.js";
import { ENGINE_ARGS_VARIABLE, ENGINE_ENV_VARIABLE, parseEngineArgs, parseEngineEnv } from "./launch-extras.js";

export const DEFAULT_READY_SECONDS = 180;
export const DEFAULT_NATIVE_PYTHON = "python3";
export const NODE_DEFAULTS = {
  sysfs_root: "/sys",
  nvidia_smi: "nvidia-smi",
  rocminfo: "rocminfo",
  dev_root: "/",
  work_dir: DEFAULT_WORK_DIR,
} as const;

/**
 * A path from a desired file, resolved against the desired directory.
 * Commands (`command: true`) that are bare names stay names, looked up on PATH
 * when run, just as a shell would treat them.
 */
export function resolveDesiredPath(dir: string, value: string, command = false): string {
  if (isAbsolute(value)) return value;
  if (command && !value.includes("/")) return value;
  return resolve(dir, value);
}

/**
 * NodeSpec with defaults and desired-relative paths resolved. A node reached
 * over ssh runs its containers on its own Docker daemon, over the same ssh
 * destination, unless docker_host says otherwise: one record says where an engine lives.
 */
export function nodeSpec(dir: string, node: FleetNode): NodeSpec {
  const ssh = node.ssh;
  const dockerHost = node.docker_host ?? (ssh === undefined ? undefined : sshDockerHost(ssh));
  return {
    name: node.name,
    sysfs_root: resolveDesiredPath(dir, node.sysfs_root ?? NODE_DEFAULTS.sysfs_root),
    nvidia_smi: resolveDesiredPath(dir, node.nvidia_smi ?? NODE_DEFAULTS.nvidia_smi, true),
    rocminfo: resolveDesiredPath(dir, node.rocminfo ?? NODE_DEFAULTS.rocminfo, true),
    dev_root: resolveDesiredPath(dir, node.dev_root ?? NODE_DEFAULTS.dev_root),
    ...(dockerHost === undefined ? {} : { docker_host: dockerHost }),
    ...(ssh === undefined
      ? {}
      : {
          ssh: {
            destination: ssh.destination,
            port: ssh.port,
            ...(ssh.identity_file === undefined ? {} : { identity_file: resolveDesiredPath(dir, ssh.identity_file) }),
            ...(ssh.known_hosts_file === undefined
              ? {}
              : { known_hosts_file: resolveDesiredPath(dir, ssh.known_hosts_file) }),
          },
        }),
    // Normalised so "/srv/runs/" and "/srv/runs" are one directory (and one input hash).
    work_dir: node.work_dir === undefined ? NODE_DEFAULTS.work_dir : posix.normalize(node.work_dir).replace(/\/+$/, ""),
  };
}

function endpoint(url: string, what: string): Endpoint {
  const e = parseEndpoint(url);
  if (typeof e === "string") throw new Error(`internal: ${what} passed validation but does not parse: ${e}`);
  return e;
}

/** Role-environment additions (NARWHAL_ENGINE_ARGS / NARWHAL_ENGINE_ENV); rules-launch-extras.ts rejected bad ones. */
interface EngineExtras {
  args: string[];
  env: Record<string, string>;
}

function launchRecord(p: EnginePair, extras: EngineExtras): LaunchRecord {
  const r = p.record;
  const derived = derivedLaunchFields(r);
  return {
    role: r.role,
    backend: r.backend,
    ...(r.image === undefined ? {} : { image: r.image }),
    accelerator: r.accelerator,
    gpu_ids: [...r.gpu_ids],
    tensor_parallel_size: r.tensor_parallel_size,
    gpu_visibility_env: r.gpu_visibility_env,
    accelerator_devices: [...r.accelerator_devices],
    network_mode: r.network_mode,
    transfer: {
      transport: r.transfer.transport,
      net_devices: [...r.transfer.net_devices],
      devices: [...r.transfer.devices],
    },
    runtime: {
      expected_packages: { ...r.runtime.expected_packages },
      model_dtype: r.runtime.model_dtype,
      kv_cache_dtype: r.runtime.kv_cache_dtype,
      block_size: r.runtime.block_size,
      // Added values come after the record's own; derived settings are applied later by the plan and win.
      environment: { ...r.runtime.environment, ...extras.env },
      extra_args: [...r.runtime.extra_args, ...extras.args],
    },
    sources: { ...r.sources },
    ...(r.shared_device === undefined ? {} : { shared_device: { ...r.shared_device } }),
    environment: derived.environment,
    vllm_args: derived.vllm_args,
  };
}

/**
 * One EngineSpec per engine (index order), input_hash included: computed, or taken from `hashes` (by engine
 * name), which a recorded validation of the same texts, launcher and node files made (load.ts RecordedValidation).
 */
export function buildSpecs(
  dir: string,
  fleet: FleetFile,
  launch: EngineLaunchFile,
  vars: Readonly<Record<string, string>>,
  launcher: LauncherIdentity,
  hashes?: ReadonlyMap<string, string>,
): EngineSpec[] {
  const get = (name: string): string | undefined => (Object.hasOwn(vars, name) ? vars[name] : undefined);
  const apiKey = get("NARWHAL_ENGINE_API_KEY");
  const revision = get("NARWHAL_MODEL_REVISION");
  const modelPath = get("NARWHAL_MODEL_PATH");
  const treePin = get("NARWHAL_MODEL_TREE_SHA256");
  const launcherPin = get("NARWHAL_ENGINE_LAUNCHER_SHA256");
  const ready = get("NARWHAL_READY_SECONDS");
  const args = parseEngineArgs(get(ENGINE_ARGS_VARIABLE));
  const env = parseEngineEnv(get(ENGINE_ENV_VARIABLE));
  if ("error" in args || "error" in env)
    throw new Error(`internal: ${ENGINE_ARGS_VARIABLE}/${ENGINE_ENV_VARIABLE} passed validation but do not parse`);
  const extras: EngineExtras = { args: args.value, env: { ...env.value } };
  // One Secret for every engine (it is immutable): the input hash digests it once (hash.ts).
  const secret = apiKey === undefined ? undefined : new Secret(apiKey);

  // The fleet's model: one object every spec shares (nothing changes a spec's model once built).
  const model: EngineSpec["model"] = {
    dir: get("NARWHAL_MODEL_DIR") ?? "",
    config_sha256: get("NARWHAL_MODEL_CONFIG_SHA256") ?? "",
    // Only when set: an unset pin leaves the input hash as it was (INPUT_HASH_VERSION).
    ...(treePin === undefined ? {} : { tree_sha256: treePin }),
    served_name: get("NARWHAL_ENGINE_MODEL_NAME") ?? "",
    ...(revision === undefined ? {} : { revision }),
    ...(modelPath === undefined ? {} : { path: modelPath }),
  };
  // What every engine's input hash holds alike, made canonical once (1000 engines: 37% of the hashed bytes).
  const known = new Map<object, string>([
    [launcher, canonicalJson(launcher)],
    [model, canonicalJson(model)],
  ]);
  return pairEngines(fleet, launch).map((p) => {
    if (!p.node) throw new Error(`internal: ${p.iid} passed validation without a node`);
    const http = endpoint(p.fleet.url, `${p.iid} url`);
    const att = endpoint(p.fleet.attestation_url, `${p.iid} attestation_url`);
    const nixl = nixlPortOf(vars, p.k).port;
    if (nixl === undefined) throw new Error(`internal: ${p.name} NIXL port passed validation but is invalid`);
    const spec: Omit<EngineSpec, "input_hash"> = {
      name: p.name,
      ...(fleet.name === undefined ? {} : { fleet: fleet.name }),
      index: p.k,
      iid: p.iid,
      role: p.fleet.role,
      node: nodeSpec(dir, p.node),
      backend: p.record.backend,
      url: p.fleet.url,
      attestation_url: p.fleet.attestation_url,
      host: http.host,
      http_port: http.port,
      attestation_port: att.port,
      nixl_port: nixl,
      // The side channel is advertised at the engine's own address: vLLM's
      // default "localhost" is wrong as soon as peers live on other hosts.
      nixl_host: http.host,
      transfer_ports: transferPortsOf(vars, p.k).ports,
      fabric_interface: get("NARWHAL_FABRIC_INTERFACE") ?? "",
      launch: launchRecord(p, extras),
      model,
      python: get("NARWHAL_NATIVE_PYTHON") ?? DEFAULT_NATIVE_PYTHON,
      ...(secret === undefined ? {} : { api_key: secret }),
      ready_seconds: ready === undefined ? DEFAULT_READY_SECONDS : Number(ready),
      launcher,
      ...(launcherPin === undefined ? {} : { launcher_pin: launcherPin }),
    };
    return { ...spec, input_hash: hashes?.get(spec.name) ?? inputHash(spec, known) };
  });
}
