// Docker endpoints as DOCKER_HOST spells them: unix://, tcp:// (TLS when
// DOCKER_TLS_VERIFY=1, certificates from DOCKER_CERT_PATH), ssh:// (through the
// operator's OpenSSH client: the agent docker-ssh.ts makes).
import fs from "node:fs";
import type http from "node:http";
import path from "node:path";
import Docker from "dockerode";
import type { DockerConfig } from "../config.js";

export const DEFAULT_SOCKET = "/var/run/docker.sock";

/** A URL's host as a socket wants it: an IPv6 address without the URL's brackets. */
const bareHost = (url: URL) => url.hostname.replace(/^\[|\]$/g, "");

export function dockerOptions(
  host: string | undefined,
  cfg: Pick<DockerConfig, "tlsVerify" | "certPath">,
  /** The HTTP agent that dials a ssh:// endpoint (streamAgent over dialStdio); required for one. */
  sshAgent?: (endpoint: string) => http.Agent,
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
      if (!sshAgent) throw new Error(`internal: the ssh:// endpoint ${host} needs an agent to dial it`);
      // Plain HTTP over the agent's streams; host and port only label the requests (the agent dials the node).
      // docker-modem honours `agent`; @types/dockerode does not list it.
      return {
        protocol: "http",
        host: bareHost(url),
        port: url.port || 22,
        agent: sshAgent(host),
      } as Docker.DockerOptions;
    default:
      throw new Error(`unsupported Docker endpoint ${host}: use unix://, tcp:// or ssh://`);
  }
}
