// A function of a module loaded on its first call. A command loads only the modules it runs: `--help`,
// `validate` and `status` of a native fleet never load the controller, the engine actions or dockerode
// (module loading was half of a no-op's CPU, issue 14).
export function lazy<A extends unknown[], R>(
  load: () => Promise<(...args: A) => R | Promise<R>>,
): (...args: A) => Promise<R> {
  return async (...args) => (await load())(...args);
}
