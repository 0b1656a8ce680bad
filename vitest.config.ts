import { defineConfig } from "vitest/config";

// Unit tests live beside their fixtures under test/ (fast: no engines, daemons or hosts; some start short
// processes, e.g. the host access's and the benchmark's measuring);
// e2e tests under test/e2e start real simulator processes and run serially
// because they bind real ports and share the machine's two cores.
// Tests on the multi-host rig (test/rig): network-namespace hosts, their own project (npm test runs it after docker).
const RIG_FILES = [
  "test/e2e/rig.test.ts",
  "test/e2e/hosts-ssh.test.ts",
  "test/e2e/*-rig.test.ts",
  "test/e2e-docker/*-rig.test.ts",
];

// Native e2e files that run in the campaign project's lane (after docker), beside the e2e lane: the
// kill-point campaign, and the KV acceptance through the CLI (moved there to keep the lanes' sums close:
// e2e 655 s + rig 106 s beside docker 438 s + campaign 237 s on a clean clone, before the move).
// The projects that run the built CLI as a process first check its bundle holds today's sources.
const BUNDLE_FRESH = "test/bundle-fresh.ts";

// secrets and suspend moved there too: on an idle clean clone the lanes were e2e 563 s + rig ~130 s
// beside docker 402 s + campaign 181 s, and the two files are about 68 s of the e2e lane. Then
// engine-faults (31 s): the lanes were e2e 635 s + rig 178 s beside docker 451 s + campaign 293 s.
const LANE_TWO_FILES = [
  "test/e2e/kill-points.test.ts",
  "test/e2e/kv-pairs.test.ts",
  "test/e2e/secrets.test.ts",
  "test/e2e/suspend.test.ts",
  "test/e2e/engine-faults.test.ts",
];

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          env: { NARWHAL_TEST_PORT_SLICE: "0" },
          include: ["test/**/*.test.ts"],
          // One module graph per worker, not per file: 42 s against 83 s (the import phase 3.8 s against
          // 16.7 s). Safe because src/ keeps no module-level mutable state (DESIGN.md), and a test that
          // fakes timers or spies restores them in its own hooks.
          isolate: false,
          exclude: ["test/e2e/**", "test/docker/**", "test/e2e-docker/**", "node_modules/**"],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "e2e",
          env: { NARWHAL_TEST_PORT_SLICE: "1" },
          include: ["test/e2e/**/*.test.ts"],
          globalSetup: [BUNDLE_FRESH],
          // The native kill-point campaign is a third of the e2e time: its own project, run beside this one.
          exclude: [...LANE_TWO_FILES, ...RIG_FILES],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          pool: "forks",
        },
      },
      {
        // Network-namespace hosts with their own sshd (test/rig). npm test runs it after the docker
        // project, beside the e2e lane: its engines live in the rig's own namespaces and subnets, and
        // its sweep touches only what a dead rig creator left (test/rig/README.md).
        test: {
          name: "rig",
          env: { NARWHAL_TEST_PORT_SLICE: "2" },
          include: RIG_FILES,
          globalSetup: [BUNDLE_FRESH],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          fileParallelism: false,
          pool: "forks",
        },
      },
      {
        // SIGKILLs at every kill point of the native procedure, then reruns (test/e2e/campaign.ts); and
        // the KV acceptance (kv-pairs), secrets and suspend, native too (LANE_TWO_FILES).
        test: {
          name: "campaign",
          env: { NARWHAL_TEST_PORT_SLICE: "3" },
          include: LANE_TWO_FILES,
          globalSetup: [BUNDLE_FRESH],
          testTimeout: 180_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          pool: "forks",
        },
      },
      {
        // Against a real Docker Engine: DOCKER_HOST, /var/run/docker.sock, or a private
        // dockerd the global setup starts (and installs as docker.io on Debian as root).
        test: {
          name: "docker",
          env: { NARWHAL_TEST_PORT_SLICE: "4" },
          include: ["test/docker/**/*.test.ts", "test/e2e-docker/**/*.test.ts"],
          exclude: RIG_FILES,
          globalSetup: [BUNDLE_FRESH, "test/docker/daemon.ts"],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
          pool: "forks",
        },
      },
    ],
  },
});
