# The model manifest, computed on the engine's node (seed 000: "The private
# discovery record binds the checkpoint to its complete manifest and matched
# tree digest"): every regular file under the model directory with its size and
# sha256, so the weights (tens of GB) are hashed where they are and never cross
# the wire. Run as `python3 - MODEL_DIR CACHE_FILE` with this script on stdin
# (CACHE_FILE "-": no cache);
# stdlib only (python3 >= 3.6 on every engine host).
#
# - Symlinks are followed and the file they name is hashed under the link's
#   path: a Hugging Face snapshot directory is all links into ../../blobs, and
#   what the loader reads is the target's bytes. A link that names nothing is
#   an error (the loader would fail on it), and so is a directory loop.
# - Entries whose name starts with "." are left out at every level (.cache/
#   of `huggingface-cli download --local-dir`, .git, .gitattributes): tooling
#   metadata no loader reads, which differs between two copies of one checkpoint.
# - A FIFO, socket or device under the directory is an error: it is no
#   checkpoint file and opening it could block.
# - CACHE_FILE keeps each file's digest under its resolved path with its
#   (size, mtime_ns, ctime_ns, inode, device): a file whose stat is unchanged
#   is not read again. ctime joins the brief's (size, mtime, inode) because
#   tools that rewrite in place and restore the mtime (rsync --inplace -t, cp -p
#   over an existing file) cannot restore a ctime. A cache that cannot be read
#   is ignored; one that cannot be written is reported, the manifest still stands.
#
# stdout: one JSON object {"files": [{"path", "size", "sha256"}] sorted by path
# (code points), "hashed": files read this time, "cached": digests taken from
# the cache, "cache_error": null or why the cache was not written}. A failure is
# {"error": what, "path": the path at fault, "errno": "ENOENT"...} and exit 3.
# stderr: while files are hashed, a line "NARWHAL_MANIFEST_PROGRESS {"files_done",
# "files", "bytes_done", "bytes"}" (of the files to hash, the cached ones aside)
# at the start and then at most every PROGRESS_S, for the operator's live line.
import errno
import hashlib
import json
import os
import stat
import sys
import tempfile
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

PROGRESS_PREFIX = "NARWHAL_MANIFEST_PROGRESS "
PROGRESS_S = 1.0

CACHE_VERSION = 1
CHUNK = 8 * 1024 * 1024


class Failure(Exception):
    def __init__(self, what, path, code):
        Exception.__init__(self, what)
        self.what, self.path, self.code = what, path, code


def errno_name(err):
    return errno.errorcode.get(err.errno, str(err.errno)) if err.errno else "EIO"


class Progress:
    """Bytes hashed so far across the worker threads, told on stderr."""

    def __init__(self, files, total):
        self.lock = threading.Lock()
        self.files, self.total = files, total
        self.files_done = self.bytes_done = 0

    def add(self, n, file_done=False):
        with self.lock:
            self.bytes_done += n
            self.files_done += 1 if file_done else 0

    def tell(self):
        with self.lock:
            said = {"files_done": self.files_done, "files": self.files, "bytes_done": self.bytes_done, "bytes": self.total}
        sys.stderr.write(PROGRESS_PREFIX + json.dumps(said) + "\n")
        sys.stderr.flush()


def sha256_of(path, progress):
    h = hashlib.sha256()
    # hashlib releases the GIL on large buffers, so threads hash files in parallel.
    with open(path, "rb", buffering=0) as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            h.update(block)
            progress.add(len(block))
    progress.add(0, file_done=True)
    return h.hexdigest()


def walk(root):
    """(relative path, resolved path, stat) of every regular file, links followed, dot-entries skipped."""
    found = []
    seen_dirs = set()

    def visit(directory, prefix):
        try:
            st = os.stat(directory)
        except OSError as e:
            raise Failure("cannot stat directory", directory, errno_name(e))
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:
            raise Failure("directory loop (a symlink names one of its own parents)", directory, "ELOOP")
        seen_dirs.add(key)
        try:
            names = sorted(os.listdir(directory))
        except OSError as e:
            raise Failure("cannot list directory", directory, errno_name(e))
        for name in names:
            if name.startswith("."):
                continue
            full = os.path.join(directory, name)
            rel = prefix + name
            try:
                st = os.stat(full)
            except OSError as e:
                what = "symlink names nothing" if os.path.islink(full) else "cannot stat"
                raise Failure(what, full, errno_name(e))
            if stat.S_ISDIR(st.st_mode):
                visit(full, rel + "/")
            elif stat.S_ISREG(st.st_mode):
                found.append((rel, os.path.realpath(full), st))
            else:
                raise Failure("not a regular file or directory", full, "EINVAL")
        seen_dirs.discard(key)

    visit(root, "")
    return found


def load_cache(cache_file):
    try:
        with open(cache_file, "r", encoding="utf-8") as f:
            data = json.load(f)
        if data.get("version") == CACHE_VERSION and isinstance(data.get("entries"), dict):
            return data["entries"]
    except (OSError, ValueError, AttributeError):
        pass
    return {}


def save_cache(cache_file, entries):
    directory = os.path.dirname(cache_file)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-cache.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": CACHE_VERSION, "entries": entries}, f, sort_keys=True)
        # Atomic: two engines of one node inspecting at once each leave a whole cache.
        os.replace(tmp, cache_file)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def stamp(st):
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def manifest(root, cache_file):
    if not os.path.isdir(root):
        code = "ENOENT" if not os.path.exists(root) else "ENOTDIR"
        raise Failure("model directory is not a directory", root, code)
    files = walk(root)
    cache = load_cache(cache_file) if cache_file != "-" else {}
    digests = {}
    todo = []  # in walk order; `queued` keeps membership O(1) for checkpoints of many files
    queued = set()
    for rel, real, st in files:
        held = cache.get(real)
        if isinstance(held, dict) and held.get("stat") == stamp(st) and isinstance(held.get("sha256"), str):
            digests[real] = held["sha256"]
        elif real not in queued:
            queued.add(real)
            todo.append(real)

    sizes = {real: st.st_size for rel, real, st in files}
    progress = Progress(len(todo), sum(sizes[real] for real in todo))

    def hash_one(real):
        try:
            return real, sha256_of(real, progress)
        except OSError as e:
            raise Failure("cannot read", real, errno_name(e))

    workers = max(1, min(8, os.cpu_count() or 1, len(todo)))
    if todo:
        progress.tell()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(hash_one, real) for real in todo]
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=PROGRESS_S, return_when=FIRST_EXCEPTION)
            if pending:
                progress.tell()
            if any(f.exception() for f in done):
                break
        # In walk order, as pool.map did: the first file that failed is the one reported.
        for f in futures:
            real, digest = f.result()
            digests[real] = digest
    entries = {}
    out = []
    for rel, real, st in files:
        entries[real] = {"stat": stamp(st), "sha256": digests[real]}
        out.append({"path": rel, "size": st.st_size, "sha256": digests[real]})
    out.sort(key=lambda f: f["path"])
    cache_error = None
    try:
        if cache_file != "-":
            save_cache(cache_file, entries)
    except OSError as e:
        cache_error = "%s: %s" % (getattr(e, "filename", None) or cache_file, errno_name(e))
    return {
        "files": out,
        "hashed": len(todo),
        "cached": len(files) - sum(1 for rel, real, st in files if real in queued),
        "cache_error": cache_error,
    }


def main():
    root, cache_file = sys.argv[1], sys.argv[2]
    try:
        result = manifest(root, cache_file)
    except Failure as f:
        json.dump({"error": f.what, "path": f.path, "errno": f.code}, sys.stdout)
        sys.stdout.write("\n")
        sys.exit(3)
    json.dump(result, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


main()
