// The parsers every HostAccess shares, on text Linux printed: `ss -Hltn` lines
// from iproute2 6.1 (a dual-stack "::" listener shows as "*", a v4-mapped one in
// brackets, a SO_BINDTODEVICE one with its %interface), /proc cmdline and environ.
import { describe, expect, it } from "vitest";
import { parseCmdline, parseEnviron, parseSsListeners } from "../../src/hosts/proc-parse.js";

describe("parseSsListeners", () => {
  it("reads the local address and port of each listener, without brackets or an interface scope", () => {
    const text = [
      "LISTEN 0      128          127.0.0.1%lo:46989 0.0.0.0:*",
      "LISTEN 0      128    [::ffff:127.0.0.1]:44751       *:*",
      "LISTEN 0      128                     *:46583       *:*",
      "LISTEN 0      128                 [::1]:35327    [::]:*",
      "LISTEN 0      4096              0.0.0.0:22      0.0.0.0:*",
      "",
    ].join("\n");
    expect(parseSsListeners(text)).toEqual([
      { address: "127.0.0.1", port: 46989 },
      { address: "::ffff:127.0.0.1", port: 44751 },
      { address: "*", port: 46583 },
      { address: "::1", port: 35327 },
      { address: "0.0.0.0", port: 22 },
    ]);
  });

  it("skips what is not a listener line", () => {
    expect(parseSsListeners("State Recv-Q Send-Q Local Peer\nESTAB 0 0 1.2.3.4:5 6.7.8.9:10\ngarbage\n")).toEqual([]);
  });
});

describe("parseCmdline", () => {
  it("splits on NUL, keeping empty arguments but not the terminator", () => {
    expect(parseCmdline("python3\0-m\0\0vllm\0")).toEqual(["python3", "-m", "", "vllm"]);
    expect(parseCmdline("")).toEqual([]);
  });
});

describe("parseEnviron", () => {
  it("reads NAME=value entries; a value may hold = and newlines", () => {
    expect(parseEnviron("A=1\0NARWHAL_LAUNCH_TOKEN=x=y\nz\0\0junk\0")).toEqual({
      A: "1",
      NARWHAL_LAUNCH_TOKEN: "x=y\nz",
    });
  });
});
