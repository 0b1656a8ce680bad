// A node's scans of its group leaders, shared by the requests that wait for the same one. Steps of many
// engines scan a node at once (each start asks whether its launch token already runs, each attestation
// sidecar whether it is up): a cold converge of 16 engines on one machine made 33 scans, 15 or so at a
// time, each reading every leader's environment. Joining a scan already under way is not enough: it may
// have listed /proc before a process the request must see was started (a retry's own engine), and a start
// that misses its engine starts a second one on its GPUs. So a request is answered by a scan that begins
// after it was made: one made while a scan runs waits for the next, which begins when that one ends and
// answers every request made meanwhile, with the names of all of them; each is told only its own names.
import { pickNames } from "./proc-parse.js";
import type { LeaderScan } from "./types.js";

interface Next {
  names: Set<string>;
  scan: Promise<LeaderScan>;
}

export class ScansAfterRequest {
  /** The scan under way, settled or not: the next one begins after it. */
  private running: Promise<unknown> = Promise.resolve();
  /** The scan not begun yet, gathering names. */
  private next: Next | undefined;

  constructor(private readonly scanNow: (names: string[]) => Promise<LeaderScan>) {}

  scan(names: string[]): Promise<LeaderScan> {
    const next = this.next ?? this.queue();
    for (const n of names) next.names.add(n);
    return next.scan.then((scan) => only(scan, names));
  }

  private queue(): Next {
    const names = new Set<string>();
    const scan = this.running.then(() => {
      this.next = undefined; // it begins: a request from here on waits for the scan after it
      return this.scanNow([...names]);
    });
    this.running = scan.catch(() => undefined);
    return (this.next = { names, scan });
  }
}

/** `scan` as a scan of `names` alone reads: each leader's variables of those names, the cwd of those that have one. */
function only(scan: LeaderScan, names: string[]): LeaderScan {
  const envs = new Map<number, Record<string, string>>();
  const cwds = new Map<number, string>();
  for (const [pid, env] of scan.envs) {
    const mine = pickNames(env, names);
    envs.set(pid, mine);
    const cwd = scan.cwds.get(pid);
    if (cwd !== undefined && Object.keys(mine).length > 0) cwds.set(pid, cwd);
  }
  return { bootId: scan.bootId, leaders: [...scan.leaders], envs, cwds };
}
