#!/usr/bin/env python3
"""Runtime check for one prepared engine plan (seed 000 "Validate the image and plan").

Runs inside the engine's own runtime (host Python with the engine's PYTHONPATH for
native engines, ``python3`` in a temporary container for images), stdlib only:

    python3 check_runtime.py INPUT.json

INPUT: plan_sha256, expected_packages {dist: version}, model_dir, tokenizer,
hf_config_path, trust_remote_code, kv_connector, kv_transfer_config, environment,
serve_command (the plan's complete argv), extra_args (the operator's part of it),
model_rules (narwhal's model-meta.ts MODEL_RULES: the convolutional-SSM model types
and config keys, the one list prepare uses too).

Checks, in order, each recorded: exact distribution versions; vllm.version.__version__
(captured as vllm_api_version); the serving command parsed by the runtime's own vLLM parser
(make_arg_parser on a FlexibleArgumentParser, then validate_parsed_serve_args, as the server
does before it loads anything); connector resolution through KVConnectorFactory and
the NIXL import; custom code (auto_map) against the plan's --trust-remote-code;
DS convolutional-state layout for SSM models; tokenizer construction. It also reports the
connector module's NIXL_CONNECTOR_VERSION and the config's architecture fields, from which
narwhal computes vLLM's NIXL compatibility inputs (nixl-compat.ts). The last stdout
line is ``NARWHAL_CHECK_RESULT {json}``. Exit 0 ok, 1 a check failed, 2 bad input.
"""
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import sys
import types

RESULT_PREFIX = "NARWHAL_CHECK_RESULT "
NIXL_MODULES = {"NixlConnector": "nixl._api"}
FIELDS = {"plan_sha256": str, "expected_packages": dict, "model_dir": str, "tokenizer": (str, type(None)),
          "hf_config_path": (str, type(None)), "trust_remote_code": bool, "kv_connector": str,
          "kv_transfer_config": dict, "environment": dict, "serve_command": list, "extra_args": list,
          "model_rules": dict}
API_SERVER = "vllm.entrypoints.openai.api_server"
CLI_MAIN = "vllm.entrypoints.cli.main"
FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w.-]*")
REDISCOVER = "rerun discovery from the approved revision and prepare a new run"


class Check:
    def __init__(self, plan):
        self.plan = plan
        self.failures = []
        self.result = {"ok": False, "plan_sha256": plan["plan_sha256"], "python": sys.executable,
                       "vllm_api_version": None, "packages": {}, "connector": {}, "tokenizer": {},
                       "requires_trust_remote_code": False, "custom_code_sources": [],
                       "ssm": {"required": False, "layout": None}, "failures": self.failures}

    def fail(self, check, message, fix, field=None):
        """``field``: the input at fault, when it is more precise than the check's name."""
        self.failures.append({"check": check, "message": message, "fix": fix, **({"input": field} if field else {})})
        say(f"FAIL {check}: {message}")
        say(f"     fix: {fix}")


def say(line):
    print(line, flush=True)


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def is_conv_ssm(config, rules):
    """model-meta.ts isConvSsmConfig, on the lists it passes (rules = its MODEL_RULES)."""
    if str(config.get("model_type") or "").lower() in rules["conv_ssm_model_types"]:
        return True
    return any(config.get(key) is not None for key in rules["conv_ssm_config_keys"])


def has_auto_map(config):
    """model-meta.ts hasAutoMap: present AND non-empty (an object with an entry, or the legacy array form)."""
    value = config.get("auto_map")
    return isinstance(value, (dict, list)) and len(value) > 0


def check_packages(c):
    for dist, expected in sorted(c.plan["expected_packages"].items()):
        try:
            found = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            c.result["packages"][dist] = None
            c.fail("package", f"Package {dist} is not installed in this runtime; the plan pins {dist}=={expected}.",
                   f"Use a runtime that carries {dist}=={expected}, or pin the version the runtime carries in "
                   f"runtime.expected_packages and {REDISCOVER}.")
            continue
        c.result["packages"][dist] = found
        if found != str(expected):
            c.fail("package", f"Package {dist} is {found} in this runtime; the plan pins {dist}=={expected}.",
                   f"Install {dist}=={expected} in the runtime, or pin {dist}=={found} in "
                   f"runtime.expected_packages and {REDISCOVER}.")
        else:
            say(f"ok   package {dist}=={found}")


def check_version(c):
    try:
        from vllm.version import __version__ as api_version
    except Exception as exc:  # noqa: BLE001 - a broken install is a finding, not a crash
        c.fail("version", f"Importing vllm.version failed: {type(exc).__name__}: {exc}",
               "Repair the runtime's vLLM installation so `import vllm.version` succeeds, then check again.")
        return
    c.result["vllm_api_version"] = str(api_version)
    dist = c.result["packages"].get("vllm")
    pinned = c.plan["expected_packages"].get("vllm")
    if dist is None:
        try:
            dist = importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            dist = None
    # The package check already reports metadata != pin; this one catches an import that
    # disagrees with the installed metadata (two installs, a stale path entry, a patched tree).
    reference = dist if dist is not None else pinned
    if reference is not None and str(reference) != str(api_version):
        c.fail("version", f"vllm.version.__version__ is {api_version} but the installed vllm distribution "
               f"declares {reference}; the runtime imports a different vLLM than it declares.",
               f"Rebuild the runtime with a single vLLM install (pinned {pinned or reference}) so the import "
               "and the package metadata agree, then prepare a new run.")
    else:
        say(f"ok   vllm.version.__version__ = {api_version}")


def serve_entry(command):
    """("api_server" | "serve", argv after the entry), or (None, None) for a command vLLM does not serve from."""
    for i, arg in enumerate(command[:-1]):
        if arg == "-m" and command[i + 1] == API_SERVER:
            return "api_server", command[i + 2:]
        if arg == "-m" and command[i + 1] == CLI_MAIN and command[i + 2:i + 3] == ["serve"]:
            return "serve", command[i + 3:]
    if command and os.path.basename(command[0]) == "vllm" and command[1:2] == ["serve"]:
        return "serve", command[2:]
    return None, None


def serve_parser(entry):
    """The parser and validation the server itself runs, built from the runtime's vLLM (as its entry point does)."""
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    try:  # vLLM after 0.11.0 moved it here; 0.11.0 and earlier define it in vllm.utils
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    if entry == "api_server":
        parser = FlexibleArgumentParser(prog="api_server.py", description="vLLM OpenAI-Compatible RESTful API server.")
        return make_arg_parser(parser), validate_parsed_serve_args, []
    # `vllm serve`: the CLI's top-level parser with the serve subcommand's own subparser.
    from vllm.entrypoints.cli.serve import cmd_init
    serve = next(cmd for cmd in cmd_init() if cmd.name == "serve")
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    serve.subparser_init(parser.add_subparsers(required=False, dest="subparser"))
    return parser, serve.validate, ["serve"]


def flag_names(args):
    """Option names as FlexibleArgumentParser reads them: `--max_num_seqs=8` is `--max-num-seqs`."""
    names = set()
    for arg in args:
        if arg.startswith("--"):
            names.add("--" + arg[2:].partition("=")[0].split(".", 1)[0].replace("_", "-"))
        elif re.fullmatch(r"-[A-Za-z]\w*", arg):
            names.add(arg)
    return names


def check_serve_args(c):
    command, extra = c.plan["serve_command"], c.plan["extra_args"]
    entry, argv = serve_entry(command)
    c.result["serve_args"] = {"entry": entry, "argc": None if argv is None else len(argv)}
    if entry is None:
        c.fail("serve_args", f"The serving command {' '.join(command[:4])} ... starts no vLLM entry point narwhal "
               f"knows (-m {API_SERVER}, vllm serve), so it cannot be parsed as the runtime will.",
               "Regenerate the launch plan with this narwhal and prepare a new run.")
        return
    try:
        parser, validate, prefix = serve_parser(entry)
    except Exception as exc:  # noqa: BLE001 - a runtime without the parser is a finding
        c.fail("serve_args", f"This runtime's vLLM does not provide the serve argument parser "
               f"(make_arg_parser, FlexibleArgumentParser): {type(exc).__name__}: {exc}",
               "Use a runtime whose vLLM serves through vllm.entrypoints.openai.cli_args, pin it, and prepare a new run.")
        return
    # argparse reports a rejection by printing usage and raising SystemExit (exit 2, or 0 for --help):
    # keep its words, which name the flag, and keep the check process alive.
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            validate(parser.parse_args(prefix + argv))
    except SystemExit as exc:
        said = [line for line in (err.getvalue() + out.getvalue()).splitlines() if line.strip()]
        detail = next((l.split(": error: ", 1)[1] for l in said if ": error: " in l), None)
        reason = detail or f"the parser exits ({exc.code}) instead of serving: {' | '.join(said[-2:])}"
    except Exception as exc:  # noqa: BLE001 - validate_parsed_serve_args raises TypeError/ValueError
        reason = f"{type(exc).__name__}: {exc}"
    else:
        for line in (out.getvalue() + err.getvalue()).splitlines():  # the parser's warnings are evidence too
            say(f"     | {line}")
        say(f"ok   serving command ({len(argv)} arguments) parses with this runtime's vLLM {entry} parser")
        return
    flags = flag_names(FLAG.findall(reason))
    named = sorted(flag_names(extra) & flags)
    message = (f"This runtime's vLLM argument parser ({'vllm serve' if entry == 'serve' else '-m ' + API_SERVER}) "
               f"rejects the serving command: {reason}")
    # A flag the operator added, or a rejection that names no flag while the operator added some: theirs to fix.
    # A launcher-managed flag the runtime rejects means a vLLM that does not speak this narwhal's command line.
    if named or (extra and not flags):
        c.fail("serve_args", message, f"Remove or correct {', '.join(named) or 'what it names'} in runtime.extra_args "
               "(or NARWHAL_ENGINE_ARGS) so that this runtime's vLLM accepts the command.", "runtime.extra_args")
    else:
        c.fail("serve_args", message, "Use a runtime whose vLLM accepts the launcher-managed flags (pin it in "
               "runtime.expected_packages) and prepare a new run.", "runtime vLLM version")


def check_connector(c):
    name = c.plan["kv_connector"]
    config = c.plan["kv_transfer_config"]
    info = c.result["connector"]
    info.update({"name": name, "kv_role": config.get("kv_role"),
                 "backends": (config.get("kv_connector_extra_config") or {}).get("backends")})
    if config.get("kv_connector") != name:
        c.fail("connector", f"kv_transfer_config names connector {config.get('kv_connector')!r} but the plan "
               f"expects {name!r}.", f"Regenerate the launch record so both name {name}, then prepare a new run.")
        return
    try:
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        ktc = types.SimpleNamespace(**{"kv_connector_module_path": None, **config})
        cls = KVConnectorFactory.get_connector_class(ktc)
        info["class"] = f"{cls.__module__}.{cls.__qualname__}"
        # A NIXL compatibility hash input: vLLM bumps it on any change that breaks P/D interoperability.
        info["version"] = getattr(sys.modules.get(cls.__module__), "NIXL_CONNECTOR_VERSION", None)
        say(f"ok   KVConnectorFactory resolves {name} to {info['class']}")
    except Exception as exc:  # noqa: BLE001
        c.fail("connector", f"KVConnectorFactory cannot resolve {name}: {type(exc).__name__}: {exc}",
               f"Use an image whose vLLM registers {name}, or correct kv_connector in the launch record.")
        return
    module = NIXL_MODULES.get(name)
    if module:
        try:
            importlib.import_module(module)
            info["nixl_module"] = module
            say(f"ok   {module} imports")
        except Exception as exc:  # noqa: BLE001
            c.fail("connector", f"{name} resolves but {module} does not import: {type(exc).__name__}: {exc}",
                   "Install the NIXL build that matches the runtime (nixl or nixl-rocm with its native "
                   "libraries), then check again.")


def model_config(c):
    """The model's config.json (or --hf-config-path); None after recording a failure."""
    source = c.plan.get("hf_config_path") or c.plan["model_dir"]
    path = source if os.path.isfile(source) and source.endswith(".json") else os.path.join(source, "config.json")
    try:
        config = read_json(path)
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
        c.result["model_config"] = path
        return config, path
    except (OSError, ValueError) as exc:
        c.fail("model", f"Model configuration {path} is unreadable: {exc}",
               "Mount the model snapshot (or pass --hf-config-path for a GGUF file) so config.json is readable.")
        return None, path


# The config.json fields vLLM's ModelConfig derives KV heads, head size and layers from (NIXL compatibility inputs).
ARCHITECTURE_KEYS = ("model_type", "num_attention_heads", "n_head", "num_key_value_heads", "n_head_kv", "num_kv_heads",
                     "multi_query_group_num", "multi_query", "new_decoder_architecture", "head_dim", "hidden_size",
                     "n_embd", "num_hidden_layers", "n_layer", "num_layers", "kv_lora_rank", "qk_rope_head_dim",
                     "torch_dtype", "dtype")


def model_architecture(config):
    """The architecture fields of the (text) config, as narwhal's nixl-compat computes vLLM's inputs from them."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    return {k: text[k] for k in ARCHITECTURE_KEYS if k in text}


def check_custom_code(c, config_path):
    tokenizer = c.plan.get("tokenizer") or c.plan["model_dir"]
    dirs = [d for d in (os.path.dirname(config_path), c.plan["model_dir"], tokenizer) if os.path.isdir(d)]
    paths = [config_path] + [os.path.join(d, n) for d in dirs for n in ("config.json", "tokenizer_config.json")]
    sources = []
    for path in dict.fromkeys(os.path.normpath(p) for p in paths):
        try:
            data = read_json(path) if os.path.isfile(path) else None
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and has_auto_map(data):
            sources.append(path)
    required = bool(sources)
    c.result["requires_trust_remote_code"] = required
    c.result["custom_code_sources"] = sources
    flag = c.plan["trust_remote_code"]
    if required and not flag:
        c.fail("trust_remote_code", f"{', '.join(sources)} declare(s) an auto_map (custom code) but the plan does "
               "not pass --trust-remote-code.",
               "Review the code the auto_map names, then add --trust-remote-code to runtime.extra_args (or "
               "NARWHAL_ENGINE_ARGS) and prepare a new run.", "runtime.extra_args")
    elif flag and not required:
        c.fail("trust_remote_code", "The plan passes --trust-remote-code but neither the model nor the tokenizer "
               "metadata declares an auto_map.",
               "Remove --trust-remote-code from runtime.extra_args (and NARWHAL_ENGINE_ARGS) and prepare a new run.",
               "runtime.extra_args")
    else:
        say(f"ok   custom code: auto_map {'present' if required else 'absent'}, --trust-remote-code "
            f"{'set' if flag else 'not set'}")


def check_ssm(c, config):
    required = is_conv_ssm(config, c.plan["model_rules"])
    layout = c.plan["environment"].get("VLLM_SSM_CONV_STATE_LAYOUT")
    c.result["ssm"] = {"required": required, "layout": layout}
    if not required:
        say("ok   no convolutional SSM state")
        return
    if layout != "DS":
        c.fail("ssm_layout", f"Model {c.plan['model_dir']} carries convolutional SSM state but the plan sets "
               f"VLLM_SSM_CONV_STATE_LAYOUT={layout if layout is not None else '(unset)'}.",
               f"Set VLLM_SSM_CONV_STATE_LAYOUT=DS in the engine environment; {REDISCOVER}.")
    try:
        from vllm import envs
        supported = "VLLM_SSM_CONV_STATE_LAYOUT" in getattr(envs, "environment_variables", {})
    except Exception as exc:  # noqa: BLE001
        supported, detail = False, f"{type(exc).__name__}: {exc}"
    else:
        detail = "vllm.envs does not define it"
    c.result["ssm"]["runtime_supported"] = supported
    if not supported:
        c.fail("ssm_layout", f"This runtime's vLLM does not support VLLM_SSM_CONV_STATE_LAYOUT ({detail}), so the "
               "DS convolutional-state layout cannot be selected.",
               "Use an image whose vLLM supports VLLM_SSM_CONV_STATE_LAYOUT=DS, pin it, and prepare a new run.")
    elif layout == "DS":
        say("ok   SSM model with VLLM_SSM_CONV_STATE_LAYOUT=DS, supported by the runtime")


def check_tokenizer(c):
    path = c.plan.get("tokenizer") or c.plan["model_dir"]
    flag = c.plan["trust_remote_code"]
    info = c.result["tokenizer"]
    info.update({"path": path, "trust_remote_code": flag})
    try:
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=flag)
        ids = tokenizer.encode("The sea is")
    except Exception as exc:  # noqa: BLE001
        message = " ".join(str(exc).split())
        c.fail("tokenizer", f"Tokenizer {path} cannot be constructed with trust_remote_code={flag}: "
               f"{type(exc).__name__}: {message}",
               "Point --tokenizer at a directory with the checkpoint's tokenizer files, match "
               "--trust-remote-code to its auto_map, and use a transformers version that reads them.")
        return False
    info.update({"class": type(tokenizer).__name__, "vocab_size": getattr(tokenizer, "vocab_size", None),
                 "sample_ids": list(ids)[:16]})
    say(f"ok   tokenizer {path} -> {info['class']}")
    return True


def load_input(argv):
    if len(argv) != 2:
        raise ValueError("usage: check_runtime.py INPUT.json")
    plan = read_json(argv[1])
    if not isinstance(plan, dict):
        raise ValueError("input must be a JSON object")
    for field, kind in FIELDS.items():
        if field not in plan and field in ("tokenizer", "hf_config_path"):
            plan[field] = None
        value = plan.get(field)
        if not isinstance(value, kind) or (field == "expected_packages" and not all(
                isinstance(v, str) for v in value.values())) or (kind is list and not all(isinstance(v, str) for v in value)):
            raise ValueError(f"field {field} is missing or has the wrong type")
    return plan


def emit(result):
    print(RESULT_PREFIX + json.dumps(result, sort_keys=True, separators=(",", ":")), flush=True)


def main(argv):
    try:
        plan = load_input(argv)
    except (OSError, ValueError) as exc:
        say(f"bad input: {exc}")
        emit({"ok": False, "vllm_api_version": None, "packages": {}, "connector": {}, "tokenizer": {},
              "requires_trust_remote_code": False, "ssm": {"required": False, "layout": None},
              "failures": [{"check": "input", "message": f"Check input is invalid: {exc}",
                            "fix": "Regenerate the check input from the prepared plan."}]})
        return 2
    c = Check(plan)
    say(f"checking plan {plan['plan_sha256']} with {sys.executable} {sys.version.split()[0]}")
    check_packages(c)
    check_version(c)
    check_serve_args(c)
    check_connector(c)
    config, config_path = model_config(c)
    if config is not None:
        c.result["model_architecture"] = model_architecture(config)
        check_custom_code(c, config_path)
        check_ssm(c, config)
    check_tokenizer(c)
    c.result["ok"] = not c.failures
    say("runtime check passed" if c.result["ok"] else f"runtime check failed: {len(c.failures)} failure(s)")
    emit(c.result)
    return 0 if c.result["ok"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as exc:  # noqa: BLE001 - never end with a bare traceback
        say(f"internal error: {type(exc).__name__}: {exc}")
        emit({"ok": False, "vllm_api_version": None, "packages": {}, "connector": {}, "tokenizer": {},
              "requires_trust_remote_code": False, "ssm": {"required": False, "layout": None},
              "failures": [{"check": "internal", "message": f"{type(exc).__name__}: {exc}",
                            "fix": "Report this check-script error with the check log."}]})
        sys.exit(1)
