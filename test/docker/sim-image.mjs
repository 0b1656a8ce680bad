// Builds the vLLM simulator into a container image with `docker load` of an
// image tarball written here (no registry is reachable): a root filesystem
// assembled from the host's own Debian Python 3.11 (interpreter, shared
// libraries, stdlib), dash, cat and the stand-ins under test/sim/site, tagged
// `narwhal-sim:<16 hex content hash>`. The image is rebuilt only when the hash of
// its inputs changes, and a rebuild gives the same image id: every timestamp is fixed.
//
// Plain ESM with JSDoc types (declarations in sim-image.d.mts) so both
// `npm run sim:image` (scripts/sim-image.mjs) and vitest use it without a build.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";

export const SIM_REPO = "narwhal-sim";
export const SIM_SITE_DIR = "/opt/narwhal-sim/site";
export const SIM_VERSION = "0.11.0";

const PYTHON = "/usr/bin/python3.11";
const STDLIB = "/usr/lib/python3.11";
const SHELL = "/usr/bin/dash";
const CAT = "/usr/bin/cat";
/** Directory names left out of the stdlib copy (anywhere in the tree). */
const STDLIB_SKIP = new Set([
  "test",
  "tests",
  "idle_test",
  "idlelib",
  "tkinter",
  "ensurepip",
  "lib2to3",
  "__pycache__",
  "turtledemo",
  "config-3.11-x86_64-linux-gnu",
]);
/** Bumped when the image layout changes in a way the hashed inputs do not show. */
const LAYOUT_VERSION = "narwhal-sim-image/2";

const LIB_FILE = fileURLToPath(import.meta.url);
const DEFAULT_REPO_ROOT = path.resolve(path.dirname(LIB_FILE), "../..");

/**
 * A dockerode client for a DOCKER_HOST-style URI (unix://, tcp://, http(s)://, ssh://);
 * with no URI: DOCKER_HOST, else /var/run/docker.sock.
 * @param {string | undefined} [host]
 * @returns {Docker}
 */
export function dockerClient(host) {
  const uri = host || process.env.DOCKER_HOST || "unix:///var/run/docker.sock";
  if (uri.startsWith("unix://")) return new Docker({ socketPath: uri.slice("unix://".length) });
  if (uri.startsWith("/")) return new Docker({ socketPath: uri });
  const u = new URL(uri);
  if (u.protocol === "ssh:") {
    return new Docker({
      protocol: "ssh",
      host: u.hostname,
      port: u.port ? Number(u.port) : 22,
      ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    });
  }
  const tls = u.protocol === "https:" || (process.env.DOCKER_TLS_VERIFY ?? "") !== "";
  /** @type {Docker.DockerOptions} */
  const opts = {
    protocol: tls ? "https" : "http",
    host: u.hostname,
    port: u.port ? Number(u.port) : tls ? 2376 : 2375,
  };
  const certPath = process.env.DOCKER_CERT_PATH;
  if (tls && certPath) {
    opts.ca = readFileSync(path.join(certPath, "ca.pem"));
    opts.cert = readFileSync(path.join(certPath, "cert.pem"));
    opts.key = readFileSync(path.join(certPath, "key.pem"));
  }
  return new Docker(opts);
}

/**
 * @param {string} file
 * @returns {Promise<string>}
 */
async function sha256File(file) {
  return createHash("sha256")
    .update(await fs.readFile(file))
    .digest("hex");
}

/**
 * Every regular file under `dir` (relative, '/'-separated, sorted), skipping
 * __pycache__ and *.pyc, which running the simulator on the host rewrites.
 * @param {string} dir
 * @returns {Promise<string[]>}
 */
async function siteFiles(dir) {
  /** @type {string[]} */
  const out = [];
  /** @param {string} rel */
  async function walk(rel) {
    const entries = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
    for (const e of entries) {
      if (e.name === "__pycache__" || e.name.endsWith(".pyc")) continue;
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(r);
      else if (e.isFile() || e.isSymbolicLink()) out.push(r);
    }
  }
  await walk("");
  return out.sort();
}

/**
 * The content hash that names the image: sha256 over a layout version, the
 * variant, every file under test/sim/site (path and bytes), the python
 * binary's sha256 and the bytes of this library and of scripts/sim-image.mjs;
 * the first 16 hex digits.
 * @param {{ repoRoot?: string, variant?: string }} [opts]
 * @returns {Promise<string>}
 */
export async function simImageHash(opts = {}) {
  const repoRoot = opts.repoRoot ?? DEFAULT_REPO_ROOT;
  const variant = opts.variant ?? "a";
  const h = createHash("sha256");
  /** @param {string} label @param {string | Buffer} data */
  const field = (label, data) => {
    const b = typeof data === "string" ? Buffer.from(data) : data;
    h.update(`${label}\0${b.length}\0`);
    h.update(b);
  };
  field("layout", LAYOUT_VERSION);
  field("variant", variant);
  field("python-sha256", await sha256File(PYTHON));
  field("lib", await fs.readFile(LIB_FILE));
  const script = path.join(repoRoot, "scripts/sim-image.mjs");
  field("script", await fs.readFile(script).catch(() => Buffer.alloc(0)));
  const site = path.join(repoRoot, "test/sim/site");
  for (const rel of await siteFiles(site)) field(`site/${rel}`, await fs.readFile(path.join(site, rel)));
  return h.digest("hex").slice(0, 16);
}

/**
 * @param {string} cmd
 * @param {string[]} args
 * @returns {Promise<string>}
 */
function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => {
      // ldd exits 1 for files that are not dynamic executables; its stdout still counts
      if (code === 0 || (cmd === "ldd" && out)) resolve(out);
      else reject(new Error(`${cmd} ${args.join(" ")} exited ${code}: ${err.trim()}`));
    });
  });
}

/**
 * Absolute paths of the shared libraries (and dynamic loader) the given ELF files need.
 * @param {string[]} files
 * @returns {Promise<Set<string>>}
 */
async function sharedLibraries(files) {
  /** @type {Set<string>} */
  const libs = new Set();
  // one ldd per batch keeps the process count low
  for (let i = 0; i < files.length; i += 32) {
    const out = await run("ldd", files.slice(i, i + 32));
    for (const line of out.split("\n")) {
      const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s+(\/\S+)\s+\(0x/.exec(line);
      if (m?.[1]) libs.add(m[1]);
      if (/=>\s+not found/.test(line)) throw new Error(`ldd: missing library: ${line.trim()}`);
    }
  }
  return libs;
}

/**
 * Host path → rootfs-relative path with directory symlinks resolved
 * (/lib/x86_64-linux-gnu/libc.so.6 → usr/lib/x86_64-linux-gnu/libc.so.6).
 * @param {string} p
 */
async function canonical(p) {
  const dir = await fs.realpath(path.dirname(p));
  return path.join(dir, path.basename(p)).replace(/^\/+/, "");
}

/**
 * Copies the content behind `src` (following symlinks) to `root/rel`, keeping the mode.
 * @param {string} src @param {string} root @param {string} rel
 */
async function copyInto(src, root, rel) {
  const dest = path.join(root, rel);
  await fs.mkdir(path.dirname(dest), { recursive: true });
  await fs.copyFile(src, dest);
  const st = await fs.stat(src);
  await fs.chmod(dest, st.mode & 0o7777);
}

/**
 * Recursive copy, following symlinks to files, skipping dangling links and
 * directories for which `skip(name)` is true.
 * @param {string} src @param {string} dest @param {(name: string, isDir: boolean) => boolean} skip
 * @returns {Promise<string[]>} the copied regular files (source paths)
 */
async function copyTree(src, dest, skip) {
  /** @type {string[]} */
  const copied = [];
  await fs.mkdir(dest, { recursive: true });
  for (const e of await fs.readdir(src, { withFileTypes: true })) {
    const s = path.join(src, e.name);
    const d = path.join(dest, e.name);
    const st = await fs.stat(s).catch(() => null);
    if (!st) continue; // dangling symlink
    if (st.isDirectory()) {
      if (skip(e.name, true)) continue;
      copied.push(...(await copyTree(s, d, skip)));
    } else if (st.isFile()) {
      if (skip(e.name, false)) continue;
      await fs.copyFile(s, d);
      await fs.chmod(d, st.mode & 0o7777);
      copied.push(s);
    }
  }
  return copied;
}

/**
 * Assembles the simulator root filesystem under `root`.
 * @param {string} root @param {string} repoRoot @param {string} variant
 */
export async function assembleRootfs(root, repoRoot, variant) {
  for (const d of [
    "usr/bin",
    "usr/lib",
    "usr/lib64",
    "usr/sbin",
    "usr/local/bin",
    "etc",
    "dev",
    "proc",
    "sys",
    "root",
    "opt/narwhal-sim",
    "var",
  ]) {
    await fs.mkdir(path.join(root, d), { recursive: true });
  }
  for (const dir of ["bin", "lib", "lib64", "sbin"]) {
    await fs.symlink(`usr/${dir}`, path.join(root, dir)); // merged /usr, as on the host
  }
  await fs.mkdir(path.join(root, "tmp"));
  await fs.chmod(path.join(root, "tmp"), 0o1777);
  await fs.chmod(path.join(root, "root"), 0o700);

  await copyInto(PYTHON, root, "usr/bin/python3.11");
  await fs.symlink("python3.11", path.join(root, "usr/bin/python3"));
  await copyInto(SHELL, root, "usr/bin/dash");
  await fs.symlink("dash", path.join(root, "usr/bin/sh"));
  await copyInto(CAT, root, "usr/bin/cat");

  const stdlibFiles = await copyTree(
    STDLIB,
    path.join(root, STDLIB.slice(1)),
    (name, isDir) => isDir && STDLIB_SKIP.has(name),
  );
  const elfs = [PYTHON, SHELL, CAT, ...stdlibFiles.filter((f) => f.endsWith(".so"))];
  for (const lib of await sharedLibraries(elfs)) {
    await copyInto(lib, root, await canonical(lib));
  }

  await copyTree(
    path.join(repoRoot, "test/sim/site"),
    path.join(root, SIM_SITE_DIR.slice(1)),
    (name) => name === "__pycache__" || name.endsWith(".pyc"),
  );
  await fs.writeFile(path.join(root, "opt/narwhal-sim/variant"), `${variant}\n`);
  await compileBytecode(root);

  await fs.writeFile(
    path.join(root, "etc/passwd"),
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
  );
  await fs.writeFile(path.join(root, "etc/group"), "root:x:0:\nnogroup:x:65534:\n");
  // Docker bind-mounts /etc/hosts, /etc/hostname and /etc/resolv.conf over these
  for (const f of ["etc/hosts", "etc/hostname", "etc/resolv.conf"]) await fs.writeFile(path.join(root, f), "");
}

/**
 * The image's Python files compiled to bytecode beside them, by the interpreter the image runs (PYTHON, copied
 * in): as Debian's python3 and pip-installed vLLM images ship them. Without, every Python of every container
 * (each check container, each engine) compiled the stdlib and the simulator it imports from source again,
 * writing into its own container layer: 0.14 s of CPU for the api_server's imports against 0.06 s with them.
 * checked-hash pycs hold no timestamp (the image's fixed mtimes stay meaningless) and are used only while the
 * source's hash matches; the recorded paths are the image's own (-s/-p), so tracebacks name files in the image.
 * @param {string} root
 */
async function compileBytecode(root) {
  const dirs = [STDLIB, SIM_SITE_DIR].map((d) => path.join(root, d.slice(1)));
  await run(PYTHON, [
    "-m",
    "compileall",
    "-q",
    "-j",
    "0",
    "--invalidation-mode",
    "checked-hash",
    "-s",
    root,
    "-p",
    "/",
    ...dirs,
  ]);
}

/**
 * @param {Docker} docker @param {string} ref
 * @returns {Promise<{ Id: string, Size: number } | null>}
 */
async function inspectImage(docker, ref) {
  try {
    const info = await docker.getImage(ref).inspect();
    return { Id: info.Id, Size: info.Size };
  } catch (e) {
    if (/** @type {{ statusCode?: number }} */ (e).statusCode === 404) return null;
    throw e;
  }
}

/**
 * @param {Docker} docker
 * @param {NodeJS.ReadableStream} stream
 */
function followProgress(docker, stream) {
  return new Promise((resolve, reject) => {
    docker.modem.followProgress(
      stream,
      (/** @type {Error | null} */ err, /** @type {Array<{ error?: string, status?: string }>} */ out) => {
        if (err) return reject(err);
        const failed = out.find((o) => o.error);
        if (failed) return reject(new Error(`docker load: ${failed.error}`));
        resolve(out);
      },
    );
  });
}

/** Every timestamp of the image: its id then depends on its content alone (a rebuild gives the same id). */
const EPOCH = "1970-01-01T00:00:00Z";

/**
 * A tar of `dir` that is the same bytes for the same content: names sorted, every mtime the epoch,
 * owners root, no pax headers (which would carry atime and ctime).
 * @param {string} dir @param {string} out @param {string[]} members
 */
async function reproducibleTar(dir, out, members) {
  await run("tar", [
    "--format=gnu",
    "--sort=name",
    "--mtime=@0",
    "--numeric-owner",
    "--owner=0",
    "--group=0",
    "-C",
    dir,
    "-cf",
    out,
    ...members,
  ]);
}

/**
 * Writes the image as `docker save` writes one (manifest.json, the config, one layer) under `work`,
 * from a rootfs assembled there, with fixed timestamps. Its id is the sha256 of the config, which names
 * the layer by its sha256: the same inputs give the same id on every build (`docker import` stamps
 * the import time into the config, so each build got a new id).
 * @param {string} work @param {string} repoRoot @param {string} variant @param {string} tag
 * @returns {Promise<{ file: string, id: string }>}
 */
export async function writeSimImageTar(work, repoRoot, variant, tag) {
  const root = path.join(work, "rootfs");
  await assembleRootfs(root, repoRoot, variant);
  const image = path.join(work, "image");
  await fs.mkdir(image);
  await reproducibleTar(root, path.join(image, "layer.tar"), ["."]);
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      created: EPOCH,
      config: {
        Env: [`PYTHONPATH=${SIM_SITE_DIR}`, "PATH=/usr/local/bin:/usr/bin:/bin"],
        WorkingDir: "/",
        Labels: { "io.narwhal.sim-variant": variant, "io.narwhal.sim-vllm": SIM_VERSION },
        Cmd: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--help"],
      },
      rootfs: { type: "layers", diff_ids: [`sha256:${await sha256File(path.join(image, "layer.tar"))}`] },
      history: [{ created: EPOCH, comment: `narwhal vLLM simulator ${SIM_VERSION} (variant ${variant})` }],
    }),
  );
  const configHex = createHash("sha256").update(config).digest("hex");
  await fs.writeFile(path.join(image, `${configHex}.json`), config);
  await fs.writeFile(
    path.join(image, "manifest.json"),
    JSON.stringify([{ Config: `${configHex}.json`, RepoTags: [tag], Layers: ["layer.tar"] }]),
  );
  const file = path.join(work, "image.tar");
  await reproducibleTar(image, file, ["manifest.json", `${configHex}.json`, "layer.tar"]);
  return { file, id: `sha256:${configHex}` };
}

/**
 * The image id a build of the simulator image gives, computed without a Docker daemon (a build in a
 * temporary directory, removed afterwards): what examples/container-sim pins.
 * @param {{ repoRoot?: string, variant?: string }} [opts]
 * @returns {Promise<string>}
 */
export async function simImageId(opts = {}) {
  const repoRoot = opts.repoRoot ?? DEFAULT_REPO_ROOT;
  const variant = opts.variant ?? "a";
  const work = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-sim-build-"));
  try {
    const tag = `${SIM_REPO}:${await simImageHash({ repoRoot, variant })}`;
    return (await writeSimImageTar(work, repoRoot, variant, tag)).id;
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/**
 * Makes sure `narwhal-sim:<hash>` exists on the daemon, building it when missing.
 * @param {{ docker?: Docker, dockerHost?: string, repoRoot?: string, variant?: string, tagLatest?: boolean, log?: (msg: string) => void }} [opts]
 * @returns {Promise<{ tag: string, id: string, built: boolean, size: number, buildMs: number }>}
 */
export async function ensureSimImage(opts = {}) {
  const docker = opts.docker ?? dockerClient(opts.dockerHost);
  const repoRoot = opts.repoRoot ?? DEFAULT_REPO_ROOT;
  const variant = opts.variant ?? "a";
  if (!/^[a-z0-9]+$/.test(variant)) throw new Error(`variant must be [a-z0-9]+, got ${JSON.stringify(variant)}`);
  const tagLatest = opts.tagLatest ?? variant === "a";
  const log = opts.log ?? (() => {});
  const hash = await simImageHash({ repoRoot, variant });
  const tag = `${SIM_REPO}:${hash}`;
  const started = Date.now();

  let info = await inspectImage(docker, tag);
  let built = false;
  if (!info) {
    log(`building ${tag} (variant ${variant})`);
    const work = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-sim-build-"));
    try {
      const tarball = await writeSimImageTar(work, repoRoot, variant, tag);
      const loading = /** @type {NodeJS.ReadableStream} */ (
        await docker.loadImage(createReadStream(tarball.file), { quiet: true })
      );
      await followProgress(docker, loading);
      built = true;
      info = await inspectImage(docker, tag);
      if (!info) throw new Error(`docker load finished but ${tag} is not on the daemon`);
      if (info.Id !== tarball.id)
        throw new Error(`docker load gave ${tag} the id ${info.Id}, not the sha256 of its config (${tarball.id})`);
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  }
  if (tagLatest) {
    const latest = await inspectImage(docker, `${SIM_REPO}:latest`);
    if (!latest || latest.Id !== info.Id) await docker.getImage(info.Id).tag({ repo: SIM_REPO, tag: "latest" });
  }
  const buildMs = Date.now() - started;
  if (built) log(`built ${tag} ${info.Id} in ${buildMs} ms`);
  return { tag, id: info.Id, built, size: info.Size, buildMs };
}

/**
 * Copies an image (by tag: the tag comes along) from one daemon to another, `docker save | docker load`:
 * the same image ID on both, built once. For daemons that share no data root (the rig's hosts).
 * @param {Docker} from @param {Docker} to @param {string} tag
 * @returns {Promise<void>}
 */
export async function copyImage(from, to, tag) {
  const saved = /** @type {NodeJS.ReadableStream} */ (await from.getImage(tag).get());
  const loading = /** @type {NodeJS.ReadableStream} */ (await to.loadImage(saved, { quiet: true }));
  await followProgress(to, loading);
  if (!(await inspectImage(to, tag))) throw new Error(`docker load finished but ${tag} is not on the daemon`);
}
