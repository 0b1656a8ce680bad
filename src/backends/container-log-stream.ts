// A container's log for `narwhal logs`: Docker's own log of the container
// (stdout and stderr, demultiplexed from its 8-byte frames into one stream, as
// `docker compose logs` shows them), through the engine node's Docker endpoint
// (ssh:// endpoints over the node's connection). Following ends when Docker
// ends the stream: the container stopped.
import type Docker from "dockerode";
import type { DockerCalls } from "./docker-calls.js";
import { FrameDemux } from "./engine-log.js";

export interface ContainerLogOptions {
  follow: boolean;
  /** Only the last N lines (Docker's `tail`). */
  tail?: number;
  signal: AbortSignal;
}

/** Copy a container's log to `write`; resolves when the log (or, following, the container) ends or `signal` aborts. */
export async function streamContainerLog(
  docker: DockerCalls,
  id: string,
  opts: ContainerLogOptions,
  write: (chunk: Buffer) => Promise<void>,
): Promise<void> {
  const demux = new FrameDemux();
  const container = docker.docker.getContainer(id);
  const base = {
    stdout: true,
    stderr: true,
    abortSignal: opts.signal,
    ...(opts.tail !== undefined ? { tail: opts.tail } : {}),
  };
  try {
    if (!opts.follow) {
      // Without follow Docker answers with the whole (bounded by tail) log at once.
      const all = (await container.logs({ ...base, follow: false } as Docker.ContainerLogsOptions & {
        follow: false;
      })) as unknown as Buffer;
      for (const part of [...demux.push(Buffer.from(all)), ...demux.end()]) await write(part);
      return;
    }
    const stream = (await container.logs({ ...base, follow: true } as Docker.ContainerLogsOptions & {
      follow: true;
    })) as NodeJS.ReadableStream;
    for await (const chunk of stream as AsyncIterable<Buffer>) for (const part of demux.push(chunk)) await write(part);
    for (const part of demux.end()) await write(part);
  } catch (err) {
    if (opts.signal.aborted) return;
    throw new Error(`docker logs ${id.slice(0, 12)} on ${docker.endpoint}: ${(err as Error).message}`);
  }
}
