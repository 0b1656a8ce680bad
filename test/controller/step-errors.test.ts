// An error raised inside a step is recorded with its engine and step (issue 8
// item 15: a bare Docker error was recorded as "undefined: ..."), keeping what
// it says about retrying, its input and fix, and its class name.
import { describe, expect, it } from "vitest";
import {
  CancelledError,
  HostKeyRejected,
  NarwhalError,
  NodeAccessError,
  NodeAuthFailed,
  NodeUnreachable,
  PhaseError,
  inStep,
  nodeFaultOf,
  toErrorRecord,
} from "../../src/errors.js";
import { classifySshFailure } from "../../src/hosts/ssh-errors.js";
import { DockerCallError } from "../../src/backends/docker-calls.js";

describe("inStep", () => {
  it("names a backend error for the step it was raised in, keeping retryable, input and class", () => {
    const err = new DockerCallError(
      "container logs abc",
      "docker container logs abc exceeded its deadline of 1000 ms",
      undefined,
      true,
      true,
      "NARWHAL_DOCKER_LOGS_MS",
    );
    expect(toErrorRecord(inStep(err, "engine-1", "capture"))).toEqual({
      name: "DockerCallError",
      message: "docker container logs abc exceeded its deadline of 1000 ms",
      retryable: true,
      failure: "retry",
      engine: "engine-1",
      step: "capture",
      input: "NARWHAL_DOCKER_LOGS_MS",
    });
  });

  it("names a plain error as retryable, and leaves an already named or a cancellation alone", () => {
    expect(toErrorRecord(inStep(new TypeError("boom"), "engine-2", "start"))).toMatchObject({
      name: "TypeError",
      message: "boom",
      retryable: true,
      engine: "engine-2",
      step: "start",
    });
    const named = new PhaseError("engine-1", "check", "bad pin", { retryable: false, fix: "Pin it." });
    expect(inStep(named, "engine-1", "start")).toBe(named);
    const cancelled = new CancelledError("start");
    expect(inStep(cancelled, "engine-1", "start")).toBe(cancelled);
    expect(toErrorRecord(inStep(new NarwhalError("x", { step: "stop" }), "engine-3", "start"))).toMatchObject({
      engine: "engine-3",
      step: "stop",
    });
  });
});

// Issue 10 item 4: a node that cannot be reached reaches the controller from a step through
// inStep; what the controller does with it (outwait or stop, NodeReachable) reads its class and fields.
describe("inStep with a node-access error", () => {
  const target = {
    node: "node-b",
    destination: "root@10.99.0.2",
    port: 22,
    knownHostsFile: "/etc/narwhal/known_hosts",
  };

  it.each([
    ["ssh: connect to host 10.99.0.2 port 22: Connection refused", NodeUnreachable, "unreachable", "outwait"],
    ["Host key verification failed.", HostKeyRejected, "host-key", "terminal"],
    ["root@10.99.0.2: Permission denied (publickey).", NodeAuthFailed, "auth", "terminal"],
  ] as const)("%s keeps its class, node, reason, failure class and fix", (stderr, cls, reason, failure) => {
    const raised = classifySshFailure(stderr, target)!;
    const named = inStep(raised, "engine-2", "probe");
    expect(named).toBeInstanceOf(cls);
    expect(named).toBeInstanceOf(NodeAccessError);
    const e = named as NodeAccessError;
    expect([e.node, e.destination, e.reason, e.failure, e.engine, e.step]).toEqual([
      "node-b",
      "root@10.99.0.2",
      reason,
      failure,
      "engine-2",
      "probe",
    ]);
    expect(e.fix).toBe(raised.fix);
    expect(e.message).toBe(raised.message);
    expect(e.describe()).toMatch(/^engine-2 probe: node node-b: /);
    // The record the state file keeps says the same, and reads back as the same node fault.
    const record = toErrorRecord(named);
    expect(record).toMatchObject({
      name: cls.name,
      node: "node-b",
      reason,
      failure,
      engine: "engine-2",
      step: "probe",
    });
    expect(nodeFaultOf(record)).toEqual({ node: "node-b", reason, message: raised.message });
    // The error raised is left as it was: the backend's copy names no engine.
    expect(raised.engine).toBeUndefined();
  });

  it("reads no node fault from an error that is not about node access", () => {
    expect(nodeFaultOf(toErrorRecord(new PhaseError("engine-1", "check", "bad pin")))).toBeNull();
    expect(nodeFaultOf({ node: "node-b", reason: "because", message: "x" })).toBeNull();
    expect(nodeFaultOf(null)).toBeNull();
  });
});
