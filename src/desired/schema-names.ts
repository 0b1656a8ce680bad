// The desired files `narwhal schema` prints a JSON Schema of. Their own module: the command line names
// them for every command, and json-schema.ts builds the zod schemas it generates from (19 ms of every
// command's start when the names came from there).
export const DESIRED_SCHEMA_NAMES = ["fleet", "launch"] as const;
export type DesiredSchemaName = (typeof DESIRED_SCHEMA_NAMES)[number];
