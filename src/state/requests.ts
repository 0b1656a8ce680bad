// Operator requests to a running controller (`narwhal suspend|resume|retry`):
// the controller holds the state lock, so no other process may write the state
// file. A request is one file in <state>/requests/, written atomically (0600)
// under a fresh id. The controller claims it by renaming it (so a request is
// applied once, and a withdrawn one never), applies it, and answers with
// <id>.ack.json; the command waits for that answer, so its exit code says what
// the controller did. A request no controller picked up in time is withdrawn
// by its command: nothing is applied later behind the operator's back.
import fs from "node:fs/promises";
import path from "node:path";
import { randomUUID } from "node:crypto";
import * as z from "zod";
import { readJsonIfExists, writeFileAtomic } from "./atomic-file.js";

export const REQUESTS_DIR = "requests";

export const RequestSchema = z
  .object({
    id: z.string().describe("unique id of the request; its file is <id>.json"),
    kind: z.enum(["suspend", "resume", "retry"]).describe("what the operator asks for"),
    engines: z.array(z.string()).describe("the engines named; empty with all"),
    all: z.boolean().describe("every engine the state or desired/ knows"),
    at: z.string().describe("ISO time the request was written"),
  })
  .describe("an operator's request to the controller holding the state lock");
export type OperatorRequest = z.infer<typeof RequestSchema>;

export const AckSchema = z
  .object({
    id: z.string().describe("the request answered"),
    ok: z.boolean().describe("every engine named was changed as asked, or already was"),
    results: z
      .array(
        z.object({
          engine: z.string(),
          ok: z.boolean(),
          message: z.string().describe("what was done, or why not"),
        }),
      )
      .describe("one line per engine"),
    by: z.number().describe("pid of the controller that applied it"),
    at: z.string().describe("ISO time it was applied"),
  })
  .describe("the controller's answer to a request");
export type RequestAck = z.infer<typeof AckSchema>;

export const requestsDir = (stateDir: string) => path.join(stateDir, REQUESTS_DIR);
const requestFile = (stateDir: string, id: string) => path.join(requestsDir(stateDir), `${id}.json`);
const claimedFile = (stateDir: string, id: string) => path.join(requestsDir(stateDir), `${id}.claimed`);
const ackFile = (stateDir: string, id: string) => path.join(requestsDir(stateDir), `${id}.ack.json`);

/** Write a request for the controller; its id. */
export async function writeRequest(stateDir: string, req: Omit<OperatorRequest, "id" | "at">): Promise<string> {
  const id = `${Date.now()}-${randomUUID().slice(0, 8)}`;
  await fs.mkdir(requestsDir(stateDir), { recursive: true, mode: 0o700 });
  await writeFileAtomic(requestFile(stateDir, id), JSON.stringify({ ...req, id, at: new Date().toISOString() }) + "\n");
  return id;
}

/** Requests waiting to be claimed, oldest first (ids start with their epoch ms). */
export async function pendingRequests(stateDir: string): Promise<string[]> {
  const names = await fs.readdir(requestsDir(stateDir)).catch(() => [] as string[]);
  return names
    .filter((n) => n.endsWith(".json") && !n.endsWith(".ack.json") && !n.startsWith("."))
    .map((n) => n.slice(0, -".json".length))
    .sort();
}

/**
 * Claim a request (the controller): renamed, so it is applied once and its command can no longer
 * withdraw it. null: withdrawn or claimed already; a file that does not parse is answered as refused.
 */
export async function claimRequest(stateDir: string, id: string): Promise<OperatorRequest | { id: string; invalid: string } | null> {
  try {
    await fs.rename(requestFile(stateDir, id), claimedFile(stateDir, id));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  const parsed = RequestSchema.safeParse(await readJsonIfExists(claimedFile(stateDir, id)).catch(() => null));
  return parsed.success ? parsed.data : { id, invalid: parsed.error.message };
}

/** Answer a claimed request (the controller). */
export async function acknowledge(stateDir: string, ack: RequestAck): Promise<void> {
  await writeFileAtomic(ackFile(stateDir, ack.id), JSON.stringify(ack, null, 2) + "\n");
  await fs.rm(claimedFile(stateDir, ack.id), { force: true });
}

/** Withdraw a request no controller claimed (true), or learn it was claimed (false). */
export async function withdrawRequest(stateDir: string, id: string): Promise<boolean> {
  try {
    await fs.unlink(requestFile(stateDir, id));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

/** The controller's answer, once it is there (removed once read); null past the deadline. */
export async function awaitAck(stateDir: string, id: string, timeoutMs: number, pollMs = 100): Promise<RequestAck | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const raw = await readJsonIfExists(ackFile(stateDir, id));
    if (raw !== null) {
      await fs.rm(ackFile(stateDir, id), { force: true });
      return AckSchema.parse(raw);
    }
    if (Date.now() >= deadline) return null;
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
