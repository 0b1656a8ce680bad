// The model manifest on real files in a temp dir, computed by model_manifest.py
// through a LocalHost exactly as on a node: what it lists, the tree digest, and
// the per-node cache, proven by the count of files the script says it hashed.
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/desired/hash.js";
import { NarwhalError } from "../../src/errors.js";
import { LocalHost } from "../../src/hosts/local.js";
import {
  MODEL_MANIFEST_SCHEMA,
  manifestCacheFile,
  manifestWait,
  modelManifest,
  treeSha256,
  type HashProgress,
} from "../../src/phases/host/model-manifest.js";

const host = new LocalHost("node-a", { PATH: "/usr/local/bin:/usr/bin:/bin" });
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

let root: string;
let model: string;
let cache: string;
/** null: no cache directory at all. */
const run = (cacheDir: string | null = cache) =>
  modelManifest(host, model, { signal: new AbortController().signal, ...(cacheDir ? { cacheDir } : {}) });

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "narwhal-manifest-"));
  model = path.join(root, "model");
  cache = path.join(root, "cache");
  await fs.mkdir(path.join(model, "tok"), { recursive: true });
  await fs.writeFile(path.join(model, "config.json"), '{"model_type":"llama"}');
  await fs.writeFile(path.join(model, "model-00001.safetensors"), "weights one");
  await fs.writeFile(path.join(model, "tok", "tokenizer.json"), "{}");
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe("model manifest", () => {
  it("lists every regular file with size and sha256, sorted by code point; the tree digest is over that list", async () => {
    await fs.writeFile(path.join(model, "Zeta.bin"), "z");
    await fs.writeFile(path.join(model, "é.txt"), "accent");
    const r = await run();
    expect(r.manifest).toMatchObject({ schema: MODEL_MANIFEST_SCHEMA, model_dir: model, node: "node-a" });
    expect(r.manifest.files).toEqual([
      { path: "Zeta.bin", size: 1, sha256: sha("z") },
      { path: "config.json", size: 22, sha256: sha('{"model_type":"llama"}') },
      { path: "model-00001.safetensors", size: 11, sha256: sha("weights one") },
      { path: "tok/tokenizer.json", size: 2, sha256: sha("{}") },
      { path: "é.txt", size: 6, sha256: sha("accent") },
    ]);
    expect(r.manifest.tree_sha256).toBe(sha(canonicalJson(r.manifest.files)));
    expect(treeSha256(r.manifest.files)).toBe(r.manifest.tree_sha256);
  });

  it("tells how far the hashing has come (the files to hash, the cached aside), worded for the live line", async () => {
    const told: HashProgress[] = [];
    const onProgress = (p: HashProgress) => told.push(p);
    await modelManifest(host, model, { signal: new AbortController().signal, cacheDir: cache, onProgress });
    expect(told[0]).toEqual({ files_done: 0, files: 3, bytes_done: 0, bytes: 22 + 11 + 2 });
    // All cached the second time: nothing to hash, nothing told.
    const again: HashProgress[] = [];
    await modelManifest(host, model, {
      signal: new AbortController().signal,
      cacheDir: cache,
      onProgress: (p) => again.push(p),
    });
    expect(again).toEqual([]);
    const p = { files_done: 3, files: 7, bytes_done: 12.1 * 2 ** 30, bytes: 40 * 2 ** 30 };
    expect(manifestWait("/models/x", p)).toEqual({
      awaiting: "the manifest of /models/x (hashing)",
      limitMs: null,
      sofar: "12.1 of 40.0 GiB hashed, 3 of 7 files",
    });
  });

  it("changes the tree digest when a weight file changes, even at the same size", async () => {
    const before = (await run()).manifest.tree_sha256;
    await fs.writeFile(path.join(model, "model-00001.safetensors"), "weights two");
    const after = await run();
    expect(after.manifest.tree_sha256).not.toBe(before);
    expect(after.hashed).toBe(1);
  });

  it("reuses the cache when nothing changed, and rehashes a touched file that still holds the same bytes", async () => {
    const cold = await run();
    expect(cold).toMatchObject({ hashed: 3, cached: 0, cache_error: null });
    const warm = await run();
    expect(warm).toMatchObject({ hashed: 0, cached: 3 });
    expect(warm.manifest.tree_sha256).toBe(cold.manifest.tree_sha256);

    const weights = path.join(model, "model-00001.safetensors");
    const later = new Date(Date.now() + 5000);
    await fs.utimes(weights, later, later);
    const touched = await run();
    expect(touched).toMatchObject({ hashed: 1, cached: 2 });
    expect(touched.manifest.tree_sha256).toBe(cold.manifest.tree_sha256);

    // Replaced by another file (a new inode) with the old bytes and the old mtime: still rehashed.
    const stat = await fs.stat(weights);
    await fs.writeFile(`${weights}.new`, "weights one");
    await fs.rename(`${weights}.new`, weights);
    await fs.utimes(weights, stat.atime, stat.mtime);
    expect(await run()).toMatchObject({ hashed: 1, cached: 2 });
    // The cache is one file per model directory, private to the node's user.
    expect((await fs.stat(manifestCacheFile(cache, model))).mode & 0o077).toBe(0);
  });

  it("without a cache directory hashes everything every time", async () => {
    await run(null);
    expect(await run(null)).toMatchObject({ hashed: 3, cached: 0, cache_error: null });
  });

  it("still answers when the cache cannot be written, and says why", async () => {
    const blocked = path.join(root, "not-a-dir");
    await fs.writeFile(blocked, "");
    const r = await run(blocked);
    expect(r.manifest.files).toHaveLength(3);
    expect(r.cache_error).toMatch(/ENOTDIR|EEXIST/);
  });

  it("follows symlinks (a Hugging Face snapshot's links into blobs) and leaves dot-entries out", async () => {
    const blobs = path.join(root, "blobs");
    await fs.mkdir(blobs);
    await fs.writeFile(path.join(blobs, "abc123"), "shard two");
    await fs.symlink("../blobs/abc123", path.join(model, "model-00002.safetensors"));
    await fs.mkdir(path.join(model, ".cache", "huggingface"), { recursive: true });
    await fs.writeFile(path.join(model, ".cache", "huggingface", "download.lock"), String(Date.now()));
    await fs.writeFile(path.join(model, ".gitattributes"), "*.safetensors filter=lfs");
    const r = await run();
    expect(r.manifest.files.map((f) => f.path)).toEqual([
      "config.json",
      "model-00001.safetensors",
      "model-00002.safetensors",
      "tok/tokenizer.json",
    ]);
    expect(r.manifest.files[2]).toEqual({ path: "model-00002.safetensors", size: 9, sha256: sha("shard two") });
  });

  it("refuses a link that names nothing, naming the node, the path and model.dir", async () => {
    await fs.symlink("../blobs/gone", path.join(model, "model-00002.safetensors"));
    const err = await run().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NarwhalError);
    expect(err).toMatchObject({ input: "model.dir (NARWHAL_MODEL_DIR)", retryable: false });
    expect((err as NarwhalError).message).toBe(
      `model manifest of ${model} on node node-a: symlink names nothing: ${path.join(model, "model-00002.safetensors")} (ENOENT)`,
    );
    expect((err as NarwhalError).fix).toContain("Rerun discovery after changing the provisioned checkpoint.");
  });

  it("refuses a directory loop", async () => {
    await fs.symlink("..", path.join(model, "tok", "up"));
    await expect(run()).rejects.toThrow(/directory loop .*\(ELOOP\)/);
  });
});
