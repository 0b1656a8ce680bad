// Fixture: the controller as `narwhal status` sees it when none runs, its state last written a minute before NOW.
import type { ControllerView } from "../../src/cli/status-view.js";

export const NOW = Date.parse("2026-12-01T12:00:00.000Z");

export const free: ControllerView = {
  running: false,
  holder: null,
  stale: false,
  remote: false,
  problem: null,
  state_written_at: "2026-12-01T11:59:00.000Z",
};
