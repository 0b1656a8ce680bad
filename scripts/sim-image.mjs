#!/usr/bin/env node
// npm run sim:image [-- --docker-host URI] [--format text|json] [--variant a|b]
// Builds the vLLM simulator image `narwhal-sim:<content hash>` (docker load of a reproducible
// image tarball) from the host's Python and test/sim/site; does nothing when that tag already
// exists. Prints the image id and the deployment.env line that pins it.
// The work is in test/docker/sim-image.mjs, shared with the Docker test setup.
import { parseArgs } from "node:util";
import { dockerClient, ensureSimImage } from "../test/docker/sim-image.mjs";

const USAGE = `usage: sim-image [--docker-host URI] [--format text|json] [--variant NAME]
  --docker-host URI  Docker endpoint (default: DOCKER_HOST, else unix:///var/run/docker.sock)
  --format FMT       text (the tag, the image id and the deployment.env line) or json ({"image","id","built"})
  --variant NAME     image variant ([a-z0-9]+, default a); other variants differ only by a marker file`;

let args;
try {
  args = parseArgs({
    options: {
      "docker-host": { type: "string" },
      format: { type: "string", default: "text" },
      variant: { type: "string", default: "a" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  }).values;
} catch (e) {
  console.error(`sim-image: ${e instanceof Error ? e.message : e}\n${USAGE}`);
  process.exit(2);
}
if (args.help) {
  console.log(USAGE);
  process.exit(0);
}
if (args.format !== "text" && args.format !== "json") {
  console.error(`sim-image: --format must be text or json\n${USAGE}`);
  process.exit(2);
}

try {
  const docker = dockerClient(args["docker-host"]);
  const r = await ensureSimImage({
    docker,
    variant: args.variant,
    log: (m) => console.error(`sim-image: ${m}`),
  });
  if (args.format === "json") console.log(JSON.stringify({ image: r.tag, id: r.id, built: r.built }));
  else console.log(`${r.tag}\n${r.id}\nNARWHAL_ENGINE_IMAGE=${r.id}`);
} catch (e) {
  console.error(`sim-image: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
}
