// A real full disk for write-failure tests: a small tmpfs mounted on a fresh
// directory (the tests run as root, as the Docker project already requires),
// filled to ENOSPC by a filler file. unmount() removes the mount (and the directory it made).
import { execFileSync } from "node:child_process";
import { mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

export interface FullDisk {
  dir: string;
  /** Fill every free block, so the next write fails with ENOSPC. */
  fill(): Promise<void>;
  /** Free what fill() took. */
  free(): Promise<void>;
  unmount(): Promise<void>;
}

/** Mount a tmpfs of sizeKb on `at` (an existing empty directory), or on a fresh temporary directory. */
export async function smallDisk(sizeKb = 256, at?: string): Promise<FullDisk> {
  const dir = at ?? (await mkdtemp(path.join(tmpdir(), "narwhal-fulldisk-")));
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${sizeKb}k,mode=0700`, "tmpfs", dir]);
  return {
    dir,
    fill: async () => {
      const handle = await open(path.join(dir, "filler"), "w");
      const chunk = Buffer.alloc(4096, 1);
      try {
        for (;;) await handle.write(chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
      } finally {
        await handle.close();
      }
    },
    free: () => rm(path.join(dir, "filler"), { force: true }),
    unmount: async () => {
      // Lazy: a descriptor a failed test left open must not leave the mount behind.
      execFileSync("umount", ["-l", dir]);
      if (!at) await rm(dir, { recursive: true, force: true });
    },
  };
}
