// Docker endpoints as DOCKER_HOST spells them: unix://, tcp:// (TLS when
// DOCKER_TLS_VERIFY=1, certificates from DOCKER_CERT_PATH), ssh://.
import fs from "node:fs";
import path from "node:path";
import Docker from "dockerode";
import type { DockerConfig } from "../config.js";

export const DEFAULT_SOCKET = "/var/run/docker.sock";

/** A URL's host as a socket wants it: an IPv6 address without the URL's brackets. */
const bareHost = (url: URL) => url.hostname.replace(/^\[|\]$/g, "");

export function dockerOptions(
  host: string | undefined,
  cfg: Pick<DockerConfig, "tlsVerify" | "certPath">,
): Docker.DockerOptions {
  if (!host) return { socketPath: DEFAULT_SOCKET };
  const url = new URL(host);
  switch (url.protocol) {
    case "unix:":
      return { socketPath: decodeURIComponent(url.pathname) };
    case "tcp:":
    case "http:":
    case "https:": {
      const tls = cfg.tlsVerify || url.protocol === "https:";
      const opts: Docker.DockerOptions = {
        host: bareHost(url),
        port: url.port || (tls ? 2376 : 2375),
        protocol: tls ? "https" : "http",
      };
      if (tls && cfg.certPath) {
        opts.ca = fs.readFileSync(path.join(cfg.certPath, "ca.pem"));
        opts.cert = fs.readFileSync(path.join(cfg.certPath, "cert.pem"));
        opts.key = fs.readFileSync(path.join(cfg.certPath, "key.pem"));
      }
      return opts;
    }
    case "ssh:":
      return {
        protocol: "ssh",
        host: bareHost(url),
        port: url.port || 22,
        username: url.username || undefined,
      } as Docker.DockerOptions;
    default:
      throw new Error(`unsupported Docker endpoint ${host}: use unix://, tcp:// or ssh://`);
  }
}
