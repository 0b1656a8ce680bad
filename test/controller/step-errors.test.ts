// An error raised inside a step is recorded with its engine and step (issue 8
// item 15: a bare Docker error was recorded as "undefined: ..."), keeping what
// it says about retrying, its input and fix, and its class name.
import { describe, expect, it } from "vitest";
import { CancelledError, NarwhalError, PhaseError, inStep, toErrorRecord } from "../../src/errors.js";
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
