// Lint: a small, strict set of type-aware rules, each for a class of bug this
// codebase has paid for, rather than the whole recommended set (whose style and
// `any` rules would bury these under hundreds of findings in test fixtures).
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "state/**", "runs/**", "**/.sim-image/**"] },
  {
    files: ["**/*.ts", "**/*.mts", "**/*.js", "**/*.mjs"],
    extends: [tseslint.configs.base],
    languageOptions: {
      // One program for everything: tsconfig.test.json covers src, machines, test and scripts.
      parserOptions: { project: "./tsconfig.test.json", tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // A promise nobody awaits loses its rejection (an unhandled rejection kills the
      // controller) and its ordering; fire-and-forget must be written `void p` with a reason.
      "@typescript-eslint/no-floating-promises": "error",
      // An async callback where a sync one is expected (event handlers, forEach, if-conditions)
      // runs unawaited and its rejection escapes every error boundary.
      "@typescript-eslint/no-misused-promises": "error",
      // Awaiting a non-promise means a call was assumed async and is not: ordering is not what it reads.
      "@typescript-eslint/await-thenable": "error",
      // Typed errors (src/errors.ts): what is thrown or rejected carries a message, a stack and
      // a class the CLI's one error boundary can turn into an exit code.
      "@typescript-eslint/only-throw-error": "error",
      // A value of type any/unknown (a callback's err, signal.reason) may be passed on as it came,
      // as only-throw-error allows for throw.
      "@typescript-eslint/prefer-promise-reject-errors": [
        "error",
        { allowThrowingAny: true, allowThrowingUnknown: true },
      ],
      // `return promise` inside try skips the catch and finally it sits in.
      "@typescript-eslint/return-await": ["error", "in-try-catch"],
    },
  },
  {
    // Configuration is read in one place (src/config.ts); everything else receives it.
    files: ["src/**/*.ts", "machines/**/*.ts"],
    ignores: ["src/config.ts"],
    rules: {
      "no-restricted-properties": [
        "error",
        {
          object: "process",
          property: "env",
          message: "Read the environment only in src/config.ts and pass the value in.",
        },
      ],
    },
  },
  {
    // The CLI's bundle (scripts/bundle.mjs) is compiled on every command: `import { z }` takes zod's whole
    // namespace object (every locale, JSON Schema import), which esbuild cannot shake: 751 KB against 203 KB.
    files: ["src/**/*.ts", "machines/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector:
            "ImportDeclaration[source.value='zod'][importKind!='type'] > :matches(ImportSpecifier[imported.name='z'], ImportDefaultSpecifier)",
          message: 'Write `import * as z from "zod"`: the named `z` pulls all of zod into the bundle.',
        },
      ],
    },
  },
  {
    // Beside its own declaration file (sim-image.d.mts), so it is outside the program: lint it untyped.
    files: ["test/docker/sim-image.mjs"],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
