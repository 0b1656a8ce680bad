"""HTTP surface of the simulated engine: /health, /version, /v1/models, /metrics,
/v1/completions, with vLLM's /v1-only API-key middleware."""
import hashlib
import ipaddress
import json
import os
import socket
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import narwhal_sim_faults as faults
from vllm._narwhal_sim.kv_transfer import TransferError, kv_blocks, kv_state

WORDS = ("tide", "harbor", "north", "whale", "light", "salt", "wind", "deep", "calm", "blue", "stone",
         "river", "song", "quiet", "bright", "cold", "far", "home", "wave", "ship", "sails", "night")


def hold_kv_read():
    """kv_slow=S: a slow fabric, S seconds before a KV read starts, ended early once the switch is off (re-read every 0.1 s)."""
    until = time.monotonic() + float(faults.value("kv_slow", "0"))
    while time.monotonic() < until and faults.has("kv_slow"):
        time.sleep(0.1)


def is_ipv6(host):
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False


def create_server(host, port, handler):
    """Bind now (like vLLM's create_server_socket, which claims the port before engine init);
    listen later with ``server.server_activate()``."""
    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if is_ipv6(host or "") else socket.AF_INET

    server = Server((host or "", port), handler, bind_and_activate=False)
    server.daemon_threads = True
    try:
        server.server_bind()
    except OSError:
        server.server_close()
        raise
    return server


def completion_text(model, kv, count):
    """Deterministic: the same model, KV state (a function of the prompt's tokens) and length give the same words."""
    words = []
    for index in range(count):
        digest = hashlib.sha256(f"{model}\0{kv}\0{index}".encode()).digest()
        words.append(WORDS[digest[0] % len(WORDS)])
    return " " + " ".join(words)


class State:
    """Everything the handler needs; ``dead`` flips /health to 503."""

    def __init__(self, **fields):
        self.dead = False
        self.__dict__.update(fields)


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *args):
            pass

        def _send(self, status, body=b"", content_type="application/json"):
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            elif isinstance(body, str):
                body = body.encode()
            self.send_response(status)
            if body or content_type != "application/json":
                self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            if state.access_log:
                from http import HTTPStatus
                phrase = HTTPStatus(status).phrase
                sys.stdout.write(f"(APIServer pid={os.getpid()}) INFO:     {self.client_address[0]}:"
                                 f"{self.client_address[1]} - \"{self.command} {self.path} HTTP/1.1\" "
                                 f"{status} {phrase}\n")
                sys.stdout.flush()

        def _error(self, status, kind, message, param=None):
            self._send(status, {"error": {"message": message, "type": kind, "param": param, "code": status}})

        def _authorized(self):
            if not state.api_key or not self.path.startswith("/v1"):
                return True
            if self.headers.get("Authorization", "") == "Bearer " + state.api_key:
                return True
            self._send(401, {"error": "Unauthorized"})
            return False

        def do_GET(self):  # noqa: N802 - http.server API
            path = self.path.split("?", 1)[0]
            if not self._authorized():
                return
            if path == "/health":
                self._send(503 if state.dead else int(faults.value("health_status", "200")))
            elif path == "/version":
                self._send(200, {"version": faults.value("wrong_version", state.wrong_version)
                                 if faults.has("wrong_version") else state.reported_version})
            elif path == "/metrics":
                self._send(200, state.metrics.render(faults.values("missing_metric"),
                                                     float(faults.value("start_time_offset", "0"))),
                           "text/plain; version=0.0.4; charset=utf-8")
            elif path == "/v1/models":
                # served_model_name=X: the endpoint serves another model (another engine's, or a wrong flag).
                names = faults.values("served_model_name") or state.served
                self._send(200, {"object": "list", "data": [self._model_card(n) for n in names]})
            elif path == "/v1/completions":
                self._send(405, {"detail": "Method Not Allowed"})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802 - http.server API
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not self._authorized():
                return
            if path != "/v1/completions":
                if path in ("/health", "/version", "/metrics", "/v1/models"):
                    self._send(405, {"detail": "Method Not Allowed"})
                else:
                    self._send(404, {"detail": "Not Found"})
                return
            if state.dead:
                self._error(500, "InternalServerError", "EngineCore encountered an issue.")
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("body must be a JSON object")
            except ValueError as exc:
                self._error(400, "BadRequestError", f"Invalid JSON body: {exc}")
                return
            self._complete(body)

        def _model_card(self, name):
            now = int(time.time())
            return {"id": name, "object": "model", "created": now, "owned_by": "vllm", "root": state.root,
                    "parent": None, "max_model_len": state.max_model_len,
                    "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                                    "created": now, "allow_create_engine": False, "allow_sampling": True,
                                    "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                    "allow_fine_tuning": False, "organization": "*", "group": None,
                                    "is_blocking": False}]}

        def _complete(self, body):
            model = body.get("model") or state.served[0]
            if model not in state.served:
                self._error(404, "NotFoundError", f"The model `{model}` does not exist.", "model")
                return
            prompts = body.get("prompt")
            if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
                prompts = [prompts]
            if not isinstance(prompts, list) or not prompts:
                self._error(400, "BadRequestError", "Either prompt or prompt_embeds must be provided and non-empty.")
                return
            max_tokens = body.get("max_tokens", 16)
            if not isinstance(max_tokens, int) or max_tokens < 1:
                self._error(400, "BadRequestError", "max_tokens must be at least 1, got %r." % (max_tokens,))
                return
            params = body.get("kv_transfer_params")
            if isinstance(params, dict) and state.nixl and len(prompts) != 1:
                self._error(400, "BadRequestError", "narwhal simulator: kv_transfer_params needs a single prompt.")
                return
            request_id = f"cmpl-{uuid.uuid4().hex}"
            choices, prompt_total, returned = [], 0, None
            for index, prompt in enumerate(prompts):
                ids = prompt if isinstance(prompt, list) else state.tokenizer.encode(prompt)
                if len(ids) + max_tokens > state.max_model_len:
                    self._error(400, "BadRequestError",
                                f"This model's maximum context length is {state.max_model_len} tokens. However, "
                                f"you requested {len(ids) + max_tokens} tokens ({len(ids)} in the messages, "
                                f"{max_tokens} in the completion). Please reduce the length of the messages or "
                                "completion.")
                    return
                prompt_total += len(ids)
                try:
                    kv, returned = self._prompt_kv(ids, params, f"{request_id}-{index}")
                except TransferError:
                    # kv_load_failure_policy=fail: the request finishes with FINISHED_ERROR, the server answers 500.
                    self._error(500, "InternalServerError", "KV cache load failed for this request "
                                "(kv_load_failure_policy=fail); see the engine log for the NIXL transfer failure.")
                    return
                text = "" if faults.has("empty_completion") else completion_text(model, kv, max_tokens)
                choices.append({"index": index, "text": text, "logprobs": None,
                                "finish_reason": "length", "stop_reason": None, "prompt_logprobs": None})
            state.metrics.record_completion(prompt_total, max_tokens * len(prompts), "length")
            self._send(200, {"id": request_id, "object": "text_completion",
                             "created": int(time.time()), "model": model, "choices": choices,
                             "service_tier": None, "system_fingerprint": None,
                             "usage": {"prompt_tokens": prompt_total,
                                       "total_tokens": prompt_total + max_tokens * len(prompts),
                                       "completion_tokens": max_tokens * len(prompts),
                                       "prompt_tokens_details": None},
                             "kv_transfer_params": returned})

        def _prompt_kv(self, ids, params, request_id):
            """The prompt's KV state: computed here, or pulled from the prefill named in kv_transfer_params.
            Returns (state, kv_transfer_params for the response); raises TransferError under policy fail."""
            nixl = state.nixl if isinstance(params, dict) else None
            if nixl and params.get("do_remote_prefill") and not faults.has("kv_silent_recompute"):
                hold_kv_read()
                try:
                    blocks = nixl.pull(params)
                    state.metrics.record_prompt_source("external_kv_transfer", len(ids))
                    return kv_state(blocks), None
                except TransferError as error:
                    nixl.log_failure(error, request_id, params)
                    if error.kind != "handshake_failed":
                        state.metrics.record_failed_transfer()
                    if nixl.policy == "fail":
                        raise
            state.metrics.record_prompt_source("local_compute", len(ids))
            blocks = kv_blocks(state.root, ids, state.block_size)
            if nixl and params.get("do_remote_decode"):
                return kv_state(blocks), nixl.hold(request_id, blocks, state.tp)
            return kv_state(blocks), None

    return Handler
