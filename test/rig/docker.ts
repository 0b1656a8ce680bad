// A dockerd per rig host (createRig({ docker: true })): the private daemon of
// test/docker/daemon.ts, started inside the host's network namespace (so a
// host-network container is in that host's namespace) with its data root,
// exec root, pid file and socket under the host's dir; the host's ssh sessions
// see the socket at /var/run/docker.sock (sshd.ts). The simulator image is
// built once, into the first host's daemon, and copied to the others
// (docker save | docker load: the same image ID on every host).
import path from "node:path";
import type Docker from "dockerode";
import type { PrivateDaemon } from "../docker/daemon.js";

export interface RigDocker {
  /** unix:// URI of the host's daemon, for test setup and assertions from the controller's side */
  host: string;
  /** its socket, outside the host; /var/run/docker.sock in the host's ssh sessions links to it */
  socket: string;
  client: Docker;
  /** stop the daemon as a daemon restart or crash would (SIGTERM), keeping its data and socket path */
  halt(): Promise<void>;
  /** start it again after halt, on the same data, socket and namespace */
  start(): Promise<void>;
}

export interface RigSimImage {
  tag: string;
  id: string;
  /** how long building and copying it to every host took (ms) */
  ms: number;
}

/** The dir of a host's daemon, and the socket path the host's sshd links /run/docker.sock to. */
export function dockerPaths(hostDir: string): { dir: string; socket: string } {
  const dir = path.join(hostDir, "dockerd");
  return { dir, socket: path.join(dir, "docker.sock") };
}

/** Start a host's dockerd in its network namespace; `stop` removes its containers, then its dir. */
export async function startHostDockerd(
  netns: string,
  hostDir: string,
): Promise<{ docker: RigDocker; stop: () => Promise<void> }> {
  // Loaded only by rigs that ask for dockerds: dockerode and the image builder are heavy.
  const { startPrivateDaemon } = await import("../docker/daemon.js");
  const { dir, socket } = dockerPaths(hostDir);
  const start = () =>
    startPrivateDaemon({
      runDir: dir,
      dataRoot: path.join(dir, "data"),
      netns: `/run/netns/${netns}`,
      // Containers under a cgroup named as the namespace (pid of the run in it): the sweep finds a
      // killed run's containers by it, also those with a network namespace of their own.
      args: [`--cgroup-parent=/${netns}`],
    });
  let d: PrivateDaemon = await start();
  let halted = false;
  const docker: RigDocker = {
    host: d.host,
    socket,
    client: d.docker,
    halt: async () => {
      halted = true;
      await d.halt();
    },
    start: async () => {
      if (!halted) return;
      d = await start(); // same dirs: its data (images, containers) is still there
      halted = false;
    },
  };
  return { docker, stop: () => d.stop() };
}

/** The simulator image (variant a) on every host's daemon. */
export async function simImageOnAll(dockers: RigDocker[]): Promise<RigSimImage> {
  const { ensureSimImage, copyImage } = await import("../docker/sim-image.mjs");
  const started = Date.now();
  const [first, ...rest] = dockers;
  if (!first) throw new Error("rig: no host daemons to put the simulator image on");
  const image = await ensureSimImage({ docker: first.client, variant: "a", tagLatest: false });
  await Promise.all(rest.map((d) => copyImage(first.client, d.client, image.tag)));
  return { tag: image.tag, id: image.id, ms: Date.now() - started };
}
