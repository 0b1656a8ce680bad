// The top-level commands of `narwhal` (main.ts builds them; test/cli/help-exit-codes.test.ts holds the two
// lists equal). bin.ts keeps one V8 code cache per command named here: a command compiles the functions it
// runs, and a cache made by another command would hold the wrong ones.
export const TOP_LEVEL_COMMANDS = [
  "validate",
  "reconcile",
  "status",
  "groups",
  "down",
  "plan",
  "apply",
  "logs",
  "prune",
  "suspend",
  "resume",
  "retry",
  "schema",
  "completion",
  "engine",
] as const;
