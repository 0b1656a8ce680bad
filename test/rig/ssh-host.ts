// The SshHost the code under test uses to reach a rig host: the host's ssh block
// (key, known_hosts), control sockets under the test's state directory.
import { SshHost, type SshHostOptions } from "../../src/hosts/ssh.js";
import type { RigHost } from "./rig.js";

/** The ssh client's environment in rig tests: no more than config.hostEnv would hold. */
export const RIG_CLIENT_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };

export function rigSshHost(h: RigHost, stateDir: string, more: Partial<SshHostOptions> = {}): SshHost {
  return new SshHost({
    node: h.name,
    destination: h.ssh.destination,
    port: h.ssh.port,
    identityFile: h.ssh.identity_file,
    knownHostsFile: h.ssh.known_hosts_file,
    stateDir,
    connectTimeoutS: 5,
    clientEnv: RIG_CLIENT_ENV,
    ...more,
  });
}
