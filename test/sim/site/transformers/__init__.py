"""transformers stand-in: AutoConfig and AutoTokenizer over local directories only.

Mirrors the behaviour the narwhal check relies on: custom code (``auto_map``)
needs ``trust_remote_code=True`` (ValueError with transformers' wording),
missing files raise OSError, and the ``tokenizer_error`` fault makes tokenizer
construction fail the way a tokenizer.json / tokenizers version mismatch does.
Custom code is never executed; its module file only has to exist.
"""
import json
import os

import narwhal_sim_faults

__version__ = "4.57.1"

_NATIVE_TOKENIZERS = {"llama": "LlamaTokenizerFast", "mistral": "LlamaTokenizerFast",
                      "qwen2": "Qwen2TokenizerFast", "mamba": "GPTNeoXTokenizerFast",
                      "mamba2": "GPTNeoXTokenizerFast"}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def _remote_code_error(name):
    return ValueError(
        f"The repository {name} contains custom code which must be executed to correctly load the "
        f"model. You can inspect the repository content at {os.path.abspath(name)} .\n"
        "Please pass the argument `trust_remote_code=True` to allow custom code to be run.")


def _not_found(name):
    return OSError(
        f"{name} is not a local folder and is not a valid model identifier listed on "
        "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a token "
        "having permission to this repo either by logging in with `hf auth login` or by passing "
        "`token=<your_token>`")


def _read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _require_module(directory, reference):
    module = reference.split(".")[0].split("--")[-1]
    if not os.path.isfile(os.path.join(directory, module + ".py")):
        raise OSError(f"{directory} does not appear to have a file named {module}.py. "
                      f"Checkout 'https://huggingface.co/{directory}/tree/None' for available files.")


class PretrainedConfig:
    model_type = ""

    def __init__(self, **kwargs):
        for key, val in kwargs.items():
            setattr(self, key, val)

    def to_dict(self):
        return dict(self.__dict__)


class AutoConfig:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, trust_remote_code=False, **kwargs):
        name = os.fspath(pretrained_model_name_or_path)
        if os.path.isfile(name):
            path, directory = name, os.path.dirname(name)
        elif os.path.isdir(name):
            path, directory = os.path.join(name, "config.json"), name
            if not os.path.isfile(path):
                raise OSError(f"{name} does not appear to have a file named config.json. Checkout "
                              f"'https://huggingface.co/{name}/tree/None' for available files.")
        else:
            raise _not_found(name)
        data = _read_json(path)
        auto = (data.get("auto_map") or {}).get("AutoConfig")
        if auto:
            if not trust_remote_code:
                raise _remote_code_error(name)
            _require_module(directory, auto)
        config = PretrainedConfig(**data)
        config.__class__ = type(auto.split(".")[-1] if auto else
                                (data.get("model_type", "").title().replace("_", "") + "Config"),
                                (PretrainedConfig,), {"model_type": data.get("model_type", "")})
        return config


class PreTrainedTokenizerFast:
    """Word-level tokenizer over tokenizer.json's ``model.vocab`` (unknown words map to unk)."""

    def __init__(self, directory, vocab, config):
        self.name_or_path = directory
        self.vocab = vocab
        self.init_kwargs = config
        self.unk_token = config.get("unk_token", "<unk>")
        self.bos_token = config.get("bos_token")
        self.eos_token = config.get("eos_token")
        self.add_bos_token = config.get("add_bos_token", self.bos_token is not None)
        self.model_max_length = config.get("model_max_length", 1e30)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def __len__(self):
        return len(self.vocab)

    def encode(self, text, add_special_tokens=True, **kwargs):
        unk = self.vocab.get(self.unk_token, 0)
        ids = [self.vocab.get(word, unk) for word in text.split()]
        if add_special_tokens and self.add_bos_token and self.bos_token in self.vocab:
            ids.insert(0, self.vocab[self.bos_token])
        return ids

    def decode(self, ids, skip_special_tokens=False, **kwargs):
        inverse = {v: k for k, v in self.vocab.items()}
        return " ".join(inverse.get(i, self.unk_token) for i in ids)

    def __call__(self, text, **kwargs):
        return {"input_ids": self.encode(text, **kwargs)}


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, trust_remote_code=False, **kwargs):
        name = os.fspath(pretrained_model_name_or_path)
        if not os.path.isdir(name):
            raise _not_found(name)
        tok_config_path = os.path.join(name, "tokenizer_config.json")
        tok_config = _read_json(tok_config_path) if os.path.isfile(tok_config_path) else {}
        model_config_path = os.path.join(name, "config.json")
        model_config = _read_json(model_config_path) if os.path.isfile(model_config_path) else {}
        auto = ((tok_config.get("auto_map") or {}).get("AutoTokenizer")
                or (model_config.get("auto_map") or {}).get("AutoTokenizer"))
        if isinstance(auto, (list, tuple)):
            auto = next((a for a in reversed(auto) if a), None) or next((a for a in auto if a), None)
        class_name = tok_config.get("tokenizer_class") or _NATIVE_TOKENIZERS.get(
            model_config.get("model_type"), "PreTrainedTokenizerFast")
        if auto:
            if not trust_remote_code:
                raise _remote_code_error(name)
            _require_module(name, auto)
            class_name = auto.split(".")[-1]
        files = [f for f in _TOKENIZER_FILES if os.path.isfile(os.path.join(name, f))]
        if not files:
            raise OSError(
                f"Can't load tokenizer for '{name}'. If you were trying to load it from "
                "'https://huggingface.co/models', make sure you don't have a local directory with the "
                f"same name. Otherwise, make sure '{name}' is the correct path to a directory containing "
                f"all relevant files for a {class_name} tokenizer.")
        if narwhal_sim_faults.has("tokenizer_error"):
            # What the Rust tokenizers library raises for a tokenizer.json it cannot parse.
            raise Exception("data did not match any variant of untagged enum ModelWrapper at line 1 column 1")
        vocab = {}
        if "tokenizer.json" in files:
            vocab = (_read_json(os.path.join(name, "tokenizer.json")).get("model") or {}).get("vocab") or {}
        tokenizer_cls = type(class_name, (PreTrainedTokenizerFast,), {})
        return tokenizer_cls(name, vocab, tok_config)
