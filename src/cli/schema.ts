// `narwhal schema fleet|launch`: the JSON Schema (draft 2020-12) of one desired
// file, generated from the zod schemas (src/desired/json-schema.ts). The output
// is the schema document itself, so `narwhal schema fleet > fleet.schema.json`
// writes a file editors and validators read as is.
import { Argument, type Command } from "commander";
import { DESIRED_SCHEMA_NAMES, type DesiredSchemaName } from "../desired/schema-names.js";
import type { Act } from "./options.js";
import { EXIT, exitCodesHelp } from "./exit-codes.js";
import { lazy } from "./lazy.js";

// Loaded by `narwhal schema` alone: it builds the desired files' zod schemas.
const desiredJsonSchema = lazy(async () => (await import("../desired/json-schema.js")).desiredJsonSchema);

export function registerSchemaCommand(program: Command, act: Act, out: (s: string) => void): void {
  program
    .command("schema")
    .description("Print the JSON Schema (draft 2020-12) of desired/fleet.json or desired/engine-launch.json")
    .addArgument(new Argument("<file>", "which desired file: fleet or launch").choices(DESIRED_SCHEMA_NAMES))
    .addHelpText(
      "after",
      `
Strings may also be a complete "\${NAME}" (substituted from deployment.env before validation).
Committed copies: schemas/fleet.schema.json, schemas/launch.schema.json; desired files point at them with "$schema".
${exitCodesHelp([
  ["ok", "printed"],
  ["invalid", "unknown file name (usage error)"],
])}`,
    )
    .action(
      act(async (_opts, file) => {
        out(JSON.stringify(await desiredJsonSchema(file as DesiredSchemaName), null, 2));
        return EXIT.ok;
      }),
    );
}
