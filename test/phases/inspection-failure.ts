// The InspectionError an inspect() call must reject with, for tests that read its problems.
import { expect } from "vitest";
import { InspectionError } from "../../src/phases/inspect-problems.js";

export async function inspectionFailure(p: Promise<unknown>): Promise<InspectionError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InspectionError);
  return err as InspectionError;
}
