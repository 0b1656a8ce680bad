// Watch mode's side of the request channel (src/state/requests.ts): chokidar on
// <state>/requests/ notices a request as soon as it is renamed into place, and a
// slow poll of the directory catches what events miss (some mounts send none).
// Requests are applied one at a time, in order; each is claimed first (so it
// is applied once) and always answered, a failure included, so the waiting
// command's exit code tells the truth.
import fs from "node:fs/promises";
import path from "node:path";
import chokidar from "chokidar";
import { describeFailure } from "../errors.js";
import type { Logger } from "../log.js";
import { acknowledge, claimRequest, pendingRequests, requestsDir, type OperatorRequest } from "../state/requests.js";
import type { RequestResult } from "./operator-requests.js";

const POLL_MS = 1000;

export interface RequestServer {
  close(): Promise<void>;
}

export async function serveRequests(
  stateDir: string,
  apply: (req: OperatorRequest) => Promise<RequestResult[]>,
  log: Pick<Logger, "info" | "error">,
): Promise<RequestServer> {
  const dir = requestsDir(stateDir);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  let chain: Promise<void> = Promise.resolve();
  let closed = false;
  const answer = async (id: string) => {
    const req = await claimRequest(stateDir, id);
    if (!req) return; // withdrawn by its command, or claimed by an earlier event
    let results: RequestResult[];
    if ("invalid" in req)
      results = [{ engine: "-", ok: false, message: `the request file does not parse: ${req.invalid}` }];
    else {
      try {
        results = await apply(req);
      } catch (err) {
        results = [{ engine: "-", ok: false, message: `the controller could not apply it: ${describeFailure(err)}` }];
      }
      log.info(`narwhal ${req.kind}: ${results.map((r) => `${r.engine} ${r.message}`).join("; ")}`);
    }
    await acknowledge(stateDir, {
      id,
      ok: results.every((r) => r.ok),
      results,
      by: process.pid,
      at: new Date().toISOString(),
    });
  };
  const take = (ids: string[]) => {
    for (const id of ids)
      chain = chain
        .then(() => (closed ? undefined : answer(id)))
        .catch((err: unknown) => log.error(`cannot answer the request ${id}: ${describeFailure(err)}`));
  };
  const isRequest = (p: string) => p.endsWith(".json") && !p.endsWith(".ack.json") && !path.basename(p).startsWith(".");
  const watcher = chokidar.watch(dir, { depth: 0, ignoreInitial: false }).on("add", (p: string) => {
    if (isRequest(p)) take([path.basename(p, ".json")]);
  });
  const poller = setInterval(() => {
    // pendingRequests does not reject (an unreadable directory lists nothing).
    void pendingRequests(stateDir).then(take);
  }, POLL_MS);
  poller.unref();
  return {
    close: async () => {
      closed = true;
      clearInterval(poller);
      await watcher.close();
      await chain;
    },
  };
}
