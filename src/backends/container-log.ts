// A container engine's log as evidence: copied into its run directory as
// engine.log, streamed into a bounded sink (first lines and tail within the
// cap), best-effort. A copy that fails says so and where the log still is (the
// container, which the caller then keeps).
import path from "node:path";
import { exists, writeFileExclusive } from "../state/atomic-file.js";
import type { DockerCalls } from "./docker-calls.js";
import { ENGINE_LOG, LogTail, type EngineLog } from "./engine-log.js";

/**
 * Read a container's log within `cap` bytes and, given a run directory, keep it there as
 * engine.log (an engine.log already there is kept: evidence is written once). Never throws.
 */
export async function copyContainerLog(
  docker: DockerCalls,
  id: string,
  runDir: string | undefined,
  cap: number,
): Promise<EngineLog> {
  const inContainer = `docker logs ${id.slice(0, 12)} on ${docker.endpoint}`;
  const sink = new LogTail(cap);
  try {
    await docker.readLog(id, sink);
  } catch (err) {
    return {
      text: sink.text(),
      where: inContainer,
      problem: `the engine log could not be copied (${(err as Error).message}); it is still in the container: ${inContainer}`,
    };
  }
  if (!runDir) return { text: sink.text(), where: inContainer };
  const file = path.join(runDir, ENGINE_LOG);
  try {
    await writeFileExclusive(file, sink.bytes(), 0o600);
    return { text: sink.text(), where: file };
  } catch (err) {
    return {
      text: sink.text(),
      where: inContainer,
      problem: `${file} could not be written (${(err as Error).message}); the log is still in the container: ${inContainer}`,
    };
  }
}

/** Lines of a container's log its tail is asked for: a lost engine's reason quotes three. */
const TAIL_LINES = 50;

/** Only the end of a container's log (its last lines, within `bytes`), read from the daemon; nothing is copied. */
export async function containerLogTail(docker: DockerCalls, id: string, bytes: number): Promise<EngineLog> {
  const where = `docker logs ${id.slice(0, 12)} on ${docker.endpoint}`;
  const sink = new LogTail(bytes);
  try {
    await docker.readLog(id, sink, undefined, TAIL_LINES);
    return { text: sink.text(), where };
  } catch (err) {
    return { text: sink.text(), where, problem: `${where} could not be read: ${(err as Error).message}` };
  }
}

/** engine.log is already in the run directory (a dead engine's log, copied when its failure was read). */
export async function containerLogSaved(runDir: string | undefined): Promise<boolean> {
  return !!runDir && (await exists(path.join(runDir, ENGINE_LOG)));
}
