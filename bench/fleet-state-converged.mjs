// A state file for a generated desired tree (bench/fleet-gen.mjs) made of what a real controller wrote: the
// records and the KV proof of a converged prefill/decode pair (`template`, the state file of a 2-engine fleet
// converged for real) cloned for every engine, so `status` and `plan` at 1000 engines read records of the
// size and shape a converged fleet's have (machine snapshot, conditions, history, applied inputs, layout)
// and a proof for every pair they would prove, not a lower bound.
//
// The engines come in pools of `pool` (8 prefills and 8 decodes by default), each pool a cache-equivalence
// group and NIXL class of its own: every prefill of a pool is proven with every decode of it, as a converged
// controller leaves it, and none across pools. One pool of 1000 would be 250,000 pairs, each proven
// (bench/fleet-scale.mjs projects that cost). Every clone's handle is its template's live process under a
// launch token of its own, so `status` checks a live process per engine; the run directories are the
// template's, so every file a record names exists.
import crypto from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { writeDesiredSummary } from "../dist/src/state/desired-summary.js";
import { sealJson } from "../dist/src/state/state-seal.js";
import { InputsFiles } from "../dist/src/state/applied-inputs.js";
import { specInputs } from "../dist/src/controller/desired-for-plan.js";

const hex = (s, n) => crypto.createHash("sha256").update(s).digest("hex").slice(0, n);

/** The template's prefill and decode records and their proof. */
function templates(state) {
  const records = Object.values(state.engines);
  const prefill = records.find((r) => r.role === "prefill");
  const decode = records.find((r) => r.role === "decode");
  const proof = prefill && decode ? state.proofs?.[`${prefill.engine}>${decode.engine}`] : undefined;
  if (!prefill || !decode || !proof || prefill.phase !== "captured" || decode.phase !== "captured")
    throw new Error("template: a converged state of one captured prefill, one captured decode and their proof");
  return { prefill, decode, proof };
}

/** `record` as engine `name` of the generated tree: its name, hashes, token, node and its pool's model. */
function cloneRecord(record, spec, token, { group, model, nixl }, peers, at) {
  const r = structuredClone(record);
  const ctx = r.snapshot.context;
  const handle = { ...r.handle, launch_token: token, node: spec.node.name };
  Object.assign(r, { engine: spec.name, desired_hash: spec.input_hash, running_hash: spec.input_hash, handle });
  r.group_signature = group;
  // Each pool holds a model of its own (what pairs engines is the model tree and the NIXL hash).
  r.inspection = { ...r.inspection, model_tree_sha256: model };
  r.checked = { ...r.checked, nixl_compat_hash: nixl };
  r.layout = { ...r.layout, engine: spec.name, group_signature: group };
  Object.assign(ctx, { engine: spec.name, desiredHash: spec.input_hash, runningHash: spec.input_hash, handle });
  Object.assign(ctx.run, { engine: spec.name, input_hash: spec.input_hash, launch_token: token });
  ctx.layout = r.layout;
  const verb = spec.role === "prefill" ? "to" : "from";
  r.conditions = r.conditions.map((c) =>
    c.type === "KVTransfer" ? { ...c, message: `KV moves ${verb} ${peers.join(", ")} (proven at ${at})` } : c,
  );
  return r;
}

/**
 * @param {string} stateDir created if missing
 * @param {import("../dist/src/desired/types.js").DesiredState} desired loadDesired's result (prefills and decodes)
 * @param {{ engines: Record<string, any>, proofs: Record<string, any> }} template a converged 2-engine state file
 * @param {{ pool?: number }} [options]
 * @returns {Promise<{ proofs: number, bytes: number }>}
 */
export async function writeConvergedFleetState(stateDir, desired, template, { pool = 16 } = {}) {
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const tpl = templates(template);
  const at = tpl.proof.at;
  const engines = {};
  const proofs = {};
  const inputs = new InputsFiles(stateDir);
  for (let start = 0; start < desired.specs.length; start += pool) {
    const specs = desired.specs.slice(start, start + pool);
    const k = start / pool;
    // Pool 0 keeps the template's group, model tree and NIXL hash; every other pool has its own.
    const own = (what, value, n) => (k === 0 ? value : hex(`${what} ${k}`, n));
    const poolOf = {
      group: own("group", tpl.prefill.group_signature, 16),
      model: own("model", tpl.prefill.inspection.model_tree_sha256, 64),
      nixl: own("nixl", tpl.prefill.checked.nixl_compat_hash, 64),
    };
    const token = (spec) => `bench-${spec.name}`;
    const of = (role) => specs.filter((s) => s.role === role);
    const [prefills, decodes] = [of("prefill"), of("decode")];
    for (const spec of specs) {
      const peers = (spec.role === "prefill" ? decodes : prefills).map((s) => s.name);
      engines[spec.name] = cloneRecord(tpl[spec.role], spec, token(spec), poolOf, peers, at);
      // Its own applied inputs, by reference to their file, as a controller that applied the spec leaves them.
      engines[spec.name].applied_inputs = await inputs.persisted(specInputs(spec));
    }
    for (const p of prefills)
      for (const d of decodes) {
        const proof = structuredClone(tpl.proof);
        proof.prefill = { ...proof.prefill, engine: p.name, launch_token: token(p) };
        proof.decode = { ...proof.decode, engine: d.name, launch_token: token(d) };
        // Through markers: a new name may contain the other template name (engine-21 holds engine-2).
        proof.message = proof.message
          .replace(tpl.prefill.engine, "\0P")
          .replace(tpl.decode.engine, "\0D")
          .replace("\0P", p.name)
          .replace("\0D", d.name);
        proofs[`${p.name}>${d.name}`] = proof;
      }
  }
  // As a controller's compaction writes it: compact, the journal folded in, sealed (src/state/state-seal.ts).
  const text = sealJson(
    JSON.stringify({ version: template.version, engines, proofs, journal_seq: 0 }),
    template.version,
  );
  await fs.writeFile(path.join(stateDir, "narwhal.json"), text, { mode: 0o600 });
  await writeDesiredSummary(stateDir, desired);
  return { proofs: Object.keys(proofs).length, bytes: Buffer.byteLength(text) };
}
