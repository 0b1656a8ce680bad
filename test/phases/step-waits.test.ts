// What the long steps say they wait for: the check (its container or script,
// within the backend's deadline) and the stop (the process group or container,
// within the grace period); and the log's one line of a wait.
import { describe, expect, it } from "vitest";
import { checkWait } from "../../src/phases/check.js";
import { stopWait } from "../../src/phases/stop-native.js";
import { waitLogLine } from "../../src/phases/progress.js";

describe("step waits", () => {
  it("the check: its container, or the native runtime's script, within the backend's deadline", () => {
    expect(checkWait("container", 180_000)).toEqual({ awaiting: "the check container to exit", limitMs: 180_000 });
    expect(checkWait("native", 120_000)).toEqual({ awaiting: "the runtime check script to exit", limitMs: 120_000 });
  });

  it("the stop: the native process group on its node, or the container, within the grace period", () => {
    const native = { kind: "native" as const, pid: 4242, pgid: 4242, boot_id: "b", start_ticks: 1, launch_token: "t" };
    expect(stopWait({ ...native, node: "gpu-1" }, 10_000)).toEqual({
      awaiting: "process group 4242 on node gpu-1 to exit after SIGTERM",
      limitMs: 10_000,
    });
    expect(stopWait(native, 10_000).awaiting).toBe("process group 4242 to exit after SIGTERM");
    const container = { kind: "container" as const, container_id: "0123456789abcdef", launch_token: "t" };
    expect(stopWait(container, 5_000).awaiting).toBe("container 0123456789ab to stop after SIGTERM");
  });

  it("logs a wait as one plain line: where, the bound, and how far it has come", () => {
    expect(waitLogLine({ awaiting: "/health to answer 200", at: "http://h:1/health", limitMs: 60_000 })).toBe(
      "waiting for /health to answer 200 at http://h:1/health, up to 60 s",
    );
    expect(waitLogLine({ awaiting: "the manifest of /m", limitMs: null, sofar: "1.0 of 2.0 GiB hashed" })).toBe(
      "waiting for the manifest of /m: 1.0 of 2.0 GiB hashed",
    );
  });
});
