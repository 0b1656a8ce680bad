// A container image named by identity (seed 000): an image id (`sha256:<64 hex>`,
// what `docker image inspect --format '{{.Id}}'` prints) or a registry digest
// (`name[:tag]@sha256:<64 hex>`). A tag alone is mutable: two hosts may resolve
// one desired state to two images, so it is not an identity. Shared by the
// validate rule (rules-image.ts) and the backend's before-launch comparison.

const SHA256 = /^sha256:[0-9a-f]{64}$/;

export type ImageRef = { kind: "id"; id: string } | { kind: "digest"; name: string; digest: string } | { kind: "tag" };

export function parseImageRef(ref: string): ImageRef {
  if (SHA256.test(ref)) return { kind: "id", id: ref };
  const at = ref.lastIndexOf("@");
  const name = ref.slice(0, Math.max(at, 0));
  if (at > 0 && SHA256.test(ref.slice(at + 1)) && !/\s/.test(name))
    return { kind: "digest", name, digest: ref.slice(at + 1) };
  return { kind: "tag" };
}

/** The repository a digest belongs to: `name` without its tag (`registry:5000/vllm:0.11` → `registry:5000/vllm`). */
export function repositoryOf(name: string): string {
  const slash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  return colon > slash ? name.slice(0, colon) : name;
}
