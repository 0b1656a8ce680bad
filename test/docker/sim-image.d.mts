import type Docker from "dockerode";

export declare const SIM_REPO: "narwhal-sim";
export declare const SIM_SITE_DIR: "/opt/narwhal-sim/site";
export declare const SIM_VERSION: string;

/** A dockerode client for a DOCKER_HOST-style URI; with none: DOCKER_HOST, else /var/run/docker.sock. */
export declare function dockerClient(host?: string): Docker;

/** First 16 hex digits of the sha256 over the image's inputs. */
export declare function simImageHash(opts?: { repoRoot?: string; variant?: string }): Promise<string>;

/** Assembles the simulator root filesystem under `root`. */
export declare function assembleRootfs(root: string, repoRoot: string, variant: string): Promise<void>;

/** Writes the image tarball (docker save layout, fixed timestamps) under `work`; its id depends only on content. */
export declare function writeSimImageTar(
  work: string,
  repoRoot: string,
  variant: string,
  tag: string,
): Promise<{ file: string; id: string }>;

/** The image id a build gives, computed without a daemon (what examples/container-sim pins). */
export declare function simImageId(opts?: { repoRoot?: string; variant?: string }): Promise<string>;

export interface SimImage {
  /** `narwhal-sim:<16 hex>` */
  tag: string;
  /** `sha256:…` image ID */
  id: string;
  /** false when the tag already existed */
  built: boolean;
  /** bytes */
  size: number;
  buildMs: number;
}

export declare function ensureSimImage(opts?: {
  docker?: Docker;
  dockerHost?: string;
  repoRoot?: string;
  /** [a-z0-9]+, default "a"; another variant adds a different marker file, so a different image ID */
  variant?: string;
  /** also tag `narwhal-sim:latest` (default: only for variant "a") */
  tagLatest?: boolean;
  log?: (msg: string) => void;
}): Promise<SimImage>;

/** Copies an image by tag between two daemons (docker save | docker load): the same image ID on both. */
export declare function copyImage(from: Docker, to: Docker, tag: string): Promise<void>;
