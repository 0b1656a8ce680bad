// Zod's object schemas compile a parser of their own shape (new Function) the first time each one parses,
// and keep it for the process. A command parses each schema a few times and exits: the compilation never
// pays for itself. It is a fixed cost, ~10 ms a command: measured side by side (medians of 15-21, interleaved),
// a no-op `reconcile --once` of 16 engines 0.158 -> 0.149 s of CPU (0.250 -> 0.230 beside a 192-engine fleet
// whose processes the /proc scan reads), of 192 engines 0.528 -> 0.524 s; validate, plan and status of 1000
// engines within noise both ways. The result of a parse is the same either way (the compiled parser is a
// shortcut of the generic one): unit tests, which import modules without main.ts, take the compiled path; the
// CLI and the suites that run its bundle, the generic one.
//
// Zod reads the setting when a schema is constructed, so this must run before any module builds one: main.ts
// imports it first, and modules are evaluated in import order, so it runs before every other module of the CLI.
import { config } from "zod";

config({ jitless: true });
