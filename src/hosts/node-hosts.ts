// The nodes of the desired fleet and how each is reached: one HostAccess per
// node (LocalHost without an ssh block, SshHost with one), learned from the
// desired specs and kept for as long as the node's ssh target stays the same,
// so a fleet of N hosts holds N master connections. Steps and backends ask it
// for an engine's node by the node's name (what a plan and a handle record).
import path from "node:path";
import { parseDestination, sshDockerHost } from "../desired/node-host.js";
import type { EngineSpec, NodeSpec } from "../desired/types.js";
import { NarwhalError } from "../errors.js";
import { MANIFEST_CACHE_DIR } from "../phases/host/model-manifest.js";
import { LocalHost } from "./local.js";
import type { FileHelper } from "./file-helper.js";
import type { ScansAfterRequest } from "./scan-after.js";
import { SshHost } from "./ssh.js";
import type { HostAccess } from "./types.js";
import { memoInFile, type HelperPython } from "./stdlib-python.js";

/** Under the state directory: this machine's python3 for narwhal's helpers, as last looked up (README). */
export const LOCAL_HELPER_PYTHON_FILE = "helper-python";

/**
 * Nodes listed at once when a resync looks for what runs on each (a process table scan, a container
 * list): over ssh the first command to a node waits for its master's handshake (~0.3 s of the
 * controller's CPU with OpenSSH's default key exchange), so more at once than this only queue on the
 * controller's cores, and this bounds the ssh processes a fleet of many nodes starts together.
 */
export const NODES_LISTED_AT_ONCE = 16;

export interface NodeHostsOptions {
  /** The controller's state directory: SSH control sockets live under it. */
  stateDir: string;
  /** The environment of local commands and of the ssh client (config.hostEnv). */
  clientEnv: Record<string, string>;
  /**
   * This process runs on the engine's node itself (a `narwhal engine` role shell): a node it was not
   * told about is this machine, reached locally, under its own name. Off for the controller, where a
   * node it has not learned is an error.
   */
  roleShell?: boolean;
}

interface Known {
  spec: NodeSpec;
  /** What decides the connection: a change of it means a new HostAccess. */
  target: string;
  access: HostAccess;
}

function targetOf(node: NodeSpec): string {
  return node.ssh ? JSON.stringify(node.ssh) : "local";
}

export class NodeHosts {
  private readonly known = new Map<string, Known>();
  /** Accesses replaced by a changed target: closed with the rest, never mid-command. */
  private readonly retired: HostAccess[] = [];
  /** ssh:// Docker endpoints no node's ssh block spells, each with its own master (sshForDockerHost). */
  private readonly endpoints = new Map<string, SshHost>();
  /** The controller's own machine for what names no node (records from before nodes were reached over ssh). */
  private localAccess: HostAccess | undefined;
  /** The helper python lookup of this machine (LocalHost), once for all local node records. */
  private localPython: HelperPython | undefined;
  /** The machine's file helper (file-helper.ts), shared by every LocalHost as localPython is. */
  private localFiles: FileHelper | undefined;
  /** The machine's scans of group leaders (scan-after.ts): one process table, whichever node record asks. */
  private localScans: ScansAfterRequest | undefined;
  /** roleShell: the nodes named by plans and handles, each this machine. */
  private readonly roleShellNodes = new Map<string, HostAccess>();

  constructor(private readonly opts: NodeHostsOptions) {}

  /** Learn (or update) the nodes the specs run on. Nodes no longer named stay known: their engines may still run. */
  learn(specs: Iterable<Pick<EngineSpec, "node">>): void {
    for (const { node } of specs) {
      const had = this.known.get(node.name);
      const target = targetOf(node);
      if (had && had.target === target) {
        had.spec = node;
        continue;
      }
      if (had) this.retired.push(had.access);
      this.known.set(node.name, { spec: node, target, access: this.make(node) });
    }
  }

  /** This machine under a node's name. Every such access shares one helper python lookup, file helper and scan: one machine. */
  private localNamed(name: string): LocalHost {
    const access = new LocalHost(name, this.opts.clientEnv, {
      ...(this.localPython ? { helperPython: this.localPython } : {}),
      ...(this.localFiles ? { fileHelper: this.localFiles } : {}),
      ...(this.localScans ? { leaderScans: this.localScans } : {}),
      ownDirs: [this.opts.stateDir],
      // Kept for the next command, as an SshHost keeps its node's: a lookup runs python3 twice (a pyenv
      // shim: a bash script and some 20 processes each time).
      helperPythonMemo: memoInFile(path.join(this.opts.stateDir, LOCAL_HELPER_PYTHON_FILE)),
    });
    this.localPython ??= access.helperPython;
    this.localFiles ??= access.fileHelper;
    this.localScans ??= access.leaderScans;
    return access;
  }

  private make(node: NodeSpec): HostAccess {
    if (!node.ssh) return this.localNamed(node.name);
    return new SshHost({
      node: node.name,
      destination: node.ssh.destination,
      port: node.ssh.port,
      ...(node.ssh.identity_file ? { identityFile: node.ssh.identity_file } : {}),
      ...(node.ssh.known_hosts_file ? { knownHostsFile: node.ssh.known_hosts_file } : {}),
      stateDir: this.opts.stateDir,
      clientEnv: this.opts.clientEnv,
    });
  }

  /** The node's record as last learned. */
  spec(name: string): NodeSpec | undefined {
    return this.known.get(name)?.spec;
  }

  /** How to reach the node; an unknown name is an error naming it (a record or handle from a fleet that no longer has it). */
  access(node: string | Pick<NodeSpec, "name">): HostAccess {
    const name = typeof node === "string" ? node : node.name;
    const known = this.known.get(name);
    if (!known && this.opts.roleShell) {
      const local = this.roleShellNodes.get(name) ?? this.localNamed(name);
      this.roleShellNodes.set(name, local);
      return local;
    }
    if (!known)
      throw new NarwhalError(`node ${name} is not in the desired fleet, so narwhal does not know how to reach it`, {
        retryable: false,
        input: `fleet.json nodes (${name})`,
        fix: `Add node ${name} back to fleet.json (with its ssh block) so narwhal can reach and stop what runs there.`,
      });
    return known.access;
  }

  /** The controller's own machine, whatever node records say: for handles that name no node. */
  local(): HostAccess {
    this.localAccess ??= this.localNamed("local");
    return this.localAccess;
  }

  /** The node's access, or the local host when no node is named (a handle recorded before nodes had ssh). */
  accessForHandle(handle: { node?: string }): HostAccess {
    return handle.node === undefined ? this.local() : this.access(handle.node);
  }

  /** Every node learned so far, with its access (orphan sweeps walk them all). */
  all(): Array<{ spec: NodeSpec; access: HostAccess }> {
    return [...this.known.values()].map(({ spec, access }) => ({ spec, access }));
  }

  /**
   * Where a run's files live on its node: the controller's own run directory on the local host;
   * <work_dir>/<engine>/<run dir name> on a node reached over ssh (the controller's paths mean nothing there).
   */
  runDirOnNode(node: string, controllerRunDir: string): string {
    const spec = this.known.get(node)?.spec;
    if (!spec?.ssh) return controllerRunDir;
    return path.posix.join(
      spec.work_dir,
      path.basename(path.dirname(controllerRunDir)),
      path.basename(controllerRunDir),
    );
  }

  /**
   * Where the node keeps the model manifest's digest cache: under its work_dir on a node reached over
   * ssh, beside its runs; under the state directory on the local host, whose runs live there too.
   */
  manifestCacheDir(node: string): string {
    const spec = this.known.get(node)?.spec;
    if (!spec?.ssh) return path.join(this.opts.stateDir, "model-manifest-cache");
    return path.posix.join(spec.work_dir, MANIFEST_CACHE_DIR);
  }

  /**
   * The ssh access through which a `ssh://` Docker endpoint is reached. The endpoint maps to the
   * node whose default endpoint it is (its ssh block's user, host and port, as sshDockerHost spells
   * them), so the node's identity_file, known_hosts_file and master connection are used and errors
   * name the node. An endpoint no node spells that way (DOCKER_HOST=ssh://…, or a docker_host naming
   * another machine) is reached with the operator's own OpenSSH defaults (ssh_config,
   * ~/.ssh/known_hosts), one master per endpoint, and named by the endpoint.
   */
  sshForDockerHost(endpoint: string): SshHost {
    const want = sshEndpointKey(endpoint);
    for (const { spec, access } of this.known.values())
      if (spec.ssh && access instanceof SshHost && sshEndpointKey(sshDockerHost(spec.ssh)) === want) return access;
    let own = this.endpoints.get(want);
    if (!own) {
      const url = new URL(endpoint);
      const user = decodeURIComponent(url.username);
      const destination = `${user ? `${user}@` : ""}${url.hostname.replace(/^\[|\]$/g, "")}`;
      const parsed = parseDestination(destination);
      if (typeof parsed === "string")
        throw new NarwhalError(`Docker endpoint ${endpoint}: ${parsed}`, {
          retryable: false,
          input: `docker_host ${endpoint}`,
          fix: "Write the endpoint as ssh://[user@]host[:port].",
        });
      own = new SshHost({
        node: endpoint,
        destination,
        port: Number(url.port || 22),
        stateDir: this.opts.stateDir,
        clientEnv: this.opts.clientEnv,
      });
      this.endpoints.set(want, own);
    }
    return own;
  }

  /** Release every connection (SSH masters). Failures to close are not worth failing a shutdown for. */
  async close(): Promise<void> {
    const all = [...this.retired, ...[...this.known.values()].map((k) => k.access), ...this.endpoints.values()];
    this.retired.length = 0;
    this.endpoints.clear();
    await Promise.allSettled(all.map((a) => a.close()));
  }
}

/** One spelling per ssh endpoint: host names compared case-insensitively (IPv6 in brackets), port 22 written out. */
function sshEndpointKey(endpoint: string): string {
  const url = new URL(endpoint);
  return `${decodeURIComponent(url.username)}@${url.hostname.toLowerCase()}:${url.port || "22"}`;
}
