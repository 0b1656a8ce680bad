// Every malformed tree of the corpus is rejected by validateDesired with an
// issue naming the file, the JSON path (or env-file line) and what is wrong;
// nothing in the corpus throws or reaches Object.prototype.
import { mkdir, rename, symlink } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadDesired, validateDesired } from "../../src/desired/load.js";
import { DesiredStateError } from "../../src/errors.js";
import { validTree } from "../desired/fixtures.js";
import { CORPUS, expectationsOf, expectsExactly, writeCase } from "./corpus.js";
import { FILE_NAMES, freshDir as makeDir, removeTree, writeDesired } from "./tree.js";

const protoNames = Object.getOwnPropertyNames(Object.prototype).sort();
const made: string[] = [];
const freshDir = async () => {
  const dir = await makeDir();
  made.push(dir);
  return dir;
};
afterAll(async () => {
  for (const dir of made) await removeTree(dir);
});
const FILES = new Set(Object.values(FILE_NAMES));

describe("bad desired input corpus", () => {
  afterAll(() => {
    const categories = new Map<string, number>();
    for (const c of CORPUS) categories.set(c.category, (categories.get(c.category) ?? 0) + 1);
    console.log(
      `desired-input corpus: ${CORPUS.length} malformed trees in ${categories.size} categories (${[...categories].map(([k, n]) => `${k} ${n}`).join(", ")})`,
    );
  });

  it("holds at least 40 trees with distinct names", () => {
    expect(CORPUS.length).toBeGreaterThanOrEqual(40);
    expect(new Set(CORPUS.map((c) => c.name)).size).toBe(CORPUS.length);
  });

  it("starts from a valid tree", async () => {
    const dir = await freshDir();
    await writeDesired(dir, validTree());
    expect((await validateDesired(dir)).issues).toEqual([]);
  });

  it.each(CORPUS.map((c) => [c.name, c] as const))("rejects: %s", async (_name, c) => {
    const dir = await freshDir();
    const tree = await writeCase(c, dir, validTree());
    const result = await validateDesired(dir);
    expect(result.state).toBeUndefined();
    const wants = expectationsOf(c, tree);
    for (const want of wants) {
      expect(result.issues).toContainEqual(
        expect.objectContaining({ file: want.file, path: want.path, message: expect.stringMatching(want.message) }),
      );
    }
    // A tree with several mistakes reports each of them once and nothing else: no mistake hides another, no consequence is a second one.
    if (expectsExactly(c, tree))
      expect(result.issues.map((i) => `${i.file} ${i.path}`).sort()).toEqual(
        wants.map((w) => `${w.file} ${w.path}`).sort(),
      );
    // Every issue, not only the expected one, says where it is.
    for (const i of result.issues) {
      expect(FILES.has(i.file), `${i.file} is a desired file`).toBe(true);
      expect(i.path).toMatch(/^(\$|line \d+)/);
      expect(i.message.length).toBeGreaterThan(0);
    }
    await expect(loadDesired(dir)).rejects.toBeInstanceOf(DesiredStateError);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(protoNames);
  });
});

describe("symlinks inside the desired directory", () => {
  it("are followed: a ConfigMap-style ..data link loads", async () => {
    const dir = await freshDir();
    await mkdir(join(dir, "..2024_01_01"));
    await writeDesired(join(dir, "..2024_01_01"), validTree());
    await symlink("..2024_01_01", join(dir, "..data"));
    for (const f of Object.values(FILE_NAMES)) await symlink(join("..data", f), join(dir, f));
    expect((await validateDesired(dir)).issues).toEqual([]);
  });

  it("a desired directory reached through a symlink loads", async () => {
    const real = await freshDir();
    await writeDesired(real, validTree());
    const link = join(await freshDir(), "desired");
    await symlink(real, link);
    expect((await validateDesired(link)).issues).toEqual([]);
  });

  it("a file moved out of the tree and linked back is refused even when its content is valid", async () => {
    const dir = await freshDir();
    await writeDesired(dir, validTree());
    const outside = await freshDir();
    await rename(join(dir, FILE_NAMES.fleet), join(outside, FILE_NAMES.fleet));
    await symlink(join(outside, FILE_NAMES.fleet), join(dir, FILE_NAMES.fleet));
    expect((await validateDesired(dir)).issues).toEqual([
      expect.objectContaining({
        file: "fleet.json",
        path: "$",
        message: expect.stringMatching(/outside the desired directory/),
      }),
    ]);
  });
});
