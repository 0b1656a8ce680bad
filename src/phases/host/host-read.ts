// What a failed read on an engine's node means to a host probe. A file the
// node cannot give (missing, unreadable) is a finding about that input; any
// other failure (the node cannot be reached, the step was cancelled) is not
// about the file and passes through unchanged, so it is reported as what it is.
import { IoError } from "../../errors.js";

/** The errno of a failed file read on a node ("ENOENT", "EACCES", ...); rethrows anything that is not one. */
export function fileErrno(err: unknown): string {
  if (err instanceof IoError) return err.code;
  throw err;
}
