// A desired/ tree for a fleet on rig hosts (test/rig), one engine per host: each
// node record reaches its host over ssh with the rig's key and known_hosts, the
// engines bind their host's own address on the same ports (each host is its own
// network namespace), and the NIXL side channel advertises that address.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { RigHost } from "../rig/rig.js";
import { HOST_FIXTURE, REPO, launchRecord, modelSha, writeDesiredFiles, type SimEngineOptions } from "./sim-fleet.js";

/** The same ports on every host: nothing else listens in a rig host's namespace. */
export const RIG_PORTS = { http: 18501, attestation: 18511, nixl: 18521 };
/** /root is each host's own directory in its ssh sessions: a run's files there are on that host only. */
export const RIG_WORK_DIR = "/root/narwhal-runs";

export interface RigFleet {
  dir: string;
  stateDir: string;
  write(opts?: RigFleetOptions): Promise<void>;
}

export interface RigFleetOptions {
  /** One engine per host, in host order (default: a prefill on the first host, decodes on the rest). */
  engines?: SimEngineOptions[];
  container?: { image: string };
  readySeconds?: number;
}

export async function rigFleet(hosts: RigHost[], opts: RigFleetOptions = {}): Promise<RigFleet> {
  // Short: the SSH control sockets live under <state>/ssh and a socket path holds 108 bytes.
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "nwrf-"));
  const dir = path.join(root, "desired");
  await fs.mkdir(dir);
  const fleet: RigFleet = {
    dir,
    stateDir: path.join(root, "state"),
    write: (o = opts) => writeRigTree(dir, hosts, o),
  };
  await fleet.write(opts);
  return fleet;
}

async function writeRigTree(dir: string, hosts: RigHost[], o: RigFleetOptions): Promise<void> {
  const engines = o.engines ?? hosts.map(() => ({}));
  const modelDir = path.join(REPO, "test/sim/models/tiny-llama");
  const env = [
    "NARWHAL_FABRIC_INTERFACE=eth0",
    `NARWHAL_ENGINE_PORT=${RIG_PORTS.http}`,
    `NARWHAL_ATTEST_PORT=${RIG_PORTS.attestation}`,
    `NARWHAL_NIXL_PORT=${RIG_PORTS.nixl}`,
    ...engines.map((_, i) => `NARWHAL_NODE_${i + 1}_IP=${hosts[i]!.address}`),
    `NARWHAL_MODEL_DIR=${modelDir}`,
    `NARWHAL_MODEL_CONFIG_SHA256=${modelSha(modelDir)}`,
    "NARWHAL_ENGINE_MODEL_NAME=tiny-llama",
    "NARWHAL_MODEL_REVISION=sim-0001",
    "NARWHAL_NATIVE_PYTHON=/usr/bin/python3",
    "NARWHAL_ENGINE_API_KEY=rig-key-0123456789",
    `NARWHAL_READY_SECONDS=${o.readySeconds ?? 60}`,
  ];
  const role = (e: SimEngineOptions, i: number) => e.role ?? (i === 0 ? "prefill" : "decode");
  const fleet = {
    engines: engines.map((e, i) => ({
      iid: `n${i + 1}`,
      url: `\${NARWHAL_NODE_${i + 1}_URL}`,
      attestation_url: `\${NARWHAL_NODE_${i + 1}_ATTESTATION_URL}`,
      role: role(e, i),
    })),
    nodes: engines.map((_, i) => {
      const h = hosts[i]!;
      return {
        name: h.name,
        engines: [`n${i + 1}`],
        ssh: {
          destination: h.ssh.destination,
          port: h.ssh.port,
          identity_file: h.ssh.identity_file,
          known_hosts_file: h.ssh.known_hosts_file,
        },
        work_dir: RIG_WORK_DIR,
        sysfs_root: path.join(HOST_FIXTURE, "sys"),
        nvidia_smi: path.join(HOST_FIXTURE, "bin/nvidia-smi"),
        dev_root: HOST_FIXTURE,
      };
    }),
    hardware: { accelerator: "NVIDIA H100 80GB HBM3", accelerators_per_engine: 1, tensor_parallel: 1 },
  };
  // Every engine on GPU 0 of its own host.
  const launch = {
    engines: Object.fromEntries(
      engines.map((e, i) => [`engine-${i + 1}`, launchRecord(role(e, i), "0", e, o.container)]),
    ),
  };
  await writeDesiredFiles(dir, env, fleet, launch);
}
