// The tar reader observation uses to read a container's key file back (mode and bytes), against
// archives built by the writer that copies the key in, and against the shapes Docker returns.
import { describe, expect, it } from "vitest";
import { firstTarFile, tarArchive } from "../../src/backends/tar.js";

describe("firstTarFile", () => {
  it("reads back the first regular file's name, mode and bytes, past directories", () => {
    const tar = tarArchive([
      { name: "run/", mode: 0o755 },
      { name: "run/secrets/", mode: 0o700 },
      { name: "run/secrets/k", data: "s3cret", mode: 0o400 },
    ]);
    expect(firstTarFile(tar)).toEqual({ name: "run/secrets/k", mode: 0o400, data: Buffer.from("s3cret") });
  });

  it("sees a changed mode and content, and skips a file's padding to the next header", () => {
    const tar = tarArchive([
      { name: "d/", mode: 0o755 },
      { name: "k", data: "x".repeat(700), mode: 0o644 },
    ]);
    const f = firstTarFile(tar)!;
    expect(f.mode).toBe(0o644);
    expect(f.data.length).toBe(700);
  });

  it("is null for an archive with no regular file, an empty buffer, or a truncated header", () => {
    expect(firstTarFile(tarArchive([{ name: "run/", mode: 0o755 }]))).toBeNull();
    expect(firstTarFile(Buffer.alloc(0))).toBeNull();
    expect(firstTarFile(Buffer.alloc(100, 1))).toBeNull();
  });
});
