"""NIXL KV transfer between simulated engines (pull mode, as vLLM's NixlConnector does it).

A prefill request (``do_remote_decode``) keeps its KV blocks until a decode pulls them or
VLLM_NIXL_ABORT_REQUEST_TIMEOUT passes; a decode request (``do_remote_prefill``) handshakes with
the prefill's side channel (compatibility hash first, cached per remote engine id), then reads
the blocks over a real TCP connection. The blocks carry what the output depends on, so a
corrupted or stale read changes the text. Wire format: JSON lines, not ZMQ/msgpack/RDMA.
"""
import hashlib
import json
import socket
import threading
import time
import uuid

import narwhal_sim_faults as faults
from vllm.logger import emit

READ_TIMEOUT = 5.0  # vLLM's handshake socket: RCVTIMEO 5000 ms


def kv_blocks(model, ids, block_size):
    """The KV a prefill computes: one digest per block, chained over the prefix (attention sees every earlier token)."""
    blocks, prev = [], b""
    for start in range(0, len(ids), block_size):
        prev = hashlib.sha256(prev + json.dumps([model, list(ids[start:start + block_size])]).encode()).digest()
        blocks.append(prev)
    return blocks


def kv_state(blocks):
    """What generation reads from the KV cache: the text is a function of this."""
    return hashlib.sha256(b"".join(blocks)).hexdigest()


def compatibility_hash(factors):
    """vLLM's hash_factors: SHA-256 of json.dumps(factors, sort_keys=True), as narwhal's nixlCompatHash computes it.

    kv_handshake_refuse[=B] resolves the attention backend to B (default FLASHINFER) instead, read per handshake:
    every handshake with a normal peer then fails."""
    if faults.has("kv_handshake_refuse"):
        factors = dict(factors, attn_backend_name=faults.value("kv_handshake_refuse", "FLASHINFER"))
    return hashlib.sha256(json.dumps(factors, sort_keys=True).encode()).hexdigest()


class TransferError(Exception):
    """A failed handshake or read: ``kind`` is vLLM's failure_type."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class KVTransfer:
    """One engine's NIXL side: the blocks it serves (prefill) and the peers it pulls from (decode)."""

    def __init__(self, engine_id, host, port, handshake, factors, policy, prefix, timeout):
        self.engine_id, self.host, self.port = engine_id, host, port
        self.agent_name = str(uuid.uuid4())  # a new NIXL agent per start: what stale metadata points at
        self.base_handshake = dict(handshake, agent_name=self.agent_name)
        self.factors = factors
        self.policy, self.prefix, self.timeout = policy, prefix, timeout
        self.metrics = None  # set once the engine has sized its cache (Metrics needs the layout)
        self.block_bytes = 0
        self.lock = threading.Lock()
        self.blocks = {}  # block id -> KV bytes held for a remote decode
        self.pending = {}  # request id -> (block ids, expiry)
        self.next_block = 1
        self.peers = {}  # handshake cache: remote engine id (or host:port under stale_peer_metadata) -> metadata

    # ---- prefill side -------------------------------------------------------------------------

    def hold(self, request_id, blocks, tp):
        """Keep a finished prefill's blocks for the decode; return vLLM's kv_transfer_params."""
        with self.lock:
            ids = list(range(self.next_block, self.next_block + len(blocks)))
            self.next_block += len(blocks)
            self.blocks.update(zip(ids, blocks))
            self.pending[request_id] = (ids, time.monotonic() + self.timeout)
        return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": ids,
                "remote_engine_id": self.engine_id, "remote_request_id": request_id,
                "remote_host": self.host, "remote_port": self.port, "tp_size": tp}

    def expire(self):
        """Release blocks no decode pulled in time (vLLM's get_finished timeout sweep)."""
        now = time.monotonic()
        with self.lock:
            gone = [r for r, (_, until) in self.pending.items() if until <= now]
            for request_id in gone:
                for block in self.pending.pop(request_id)[0]:
                    self.blocks.pop(block, None)
        for request_id in gone:
            if self.metrics:
                self.metrics.record_expired()
            emit("WARNING", "Releasing expired KV blocks for request %s which were retrieved by %d decode worker(s) "
                 "within %d seconds.", request_id, 0, self.timeout, prefix=self.prefix, where="nixl_connector.py:1048")

    def sweep_forever(self, stop):
        while not stop.wait(0.2):
            self.expire()

    def serve(self, sock):
        """Side channel: every connection gets the handshake line, then may send one read request."""
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                conn.settimeout(READ_TIMEOUT)
                conn.sendall((json.dumps(self.handshake()) + "\n").encode())
                line = conn.makefile().readline()
                if line.strip():
                    conn.sendall((json.dumps(self._read(json.loads(line))) + "\n").encode())
            except (OSError, ValueError):
                pass

    def handshake(self):
        """The metadata line the side channel sends, hash computed now (the fault switches may have changed)."""
        return dict(self.base_handshake, compatibility_hash=compatibility_hash(self.factors),
                    attn_backend=faults.value("kv_handshake_refuse", "FLASHINFER")
                    if faults.has("kv_handshake_refuse") else self.factors["attn_backend_name"])

    def _read(self, request):
        if request.get("agent_name") != self.agent_name:
            # The decode addresses an agent (memory registrations) of an earlier start of this engine.
            return {"status": "ERR", "error": "NIXL_ERR_REMOTE_DISCONNECT: remote agent "
                    f"{request.get('agent_name')} is not loaded (this engine's agent is {self.agent_name})"}
        request_id = request.get("remote_request_id")
        with self.lock:
            known = self.pending.pop(request_id, None)
            data = [self.blocks.pop(b, bytes(32)) for b in request.get("block_ids", [])]
        if known is None:
            # Pull mode reads memory whatever the prefill thinks of the request: freed blocks read as zeros.
            emit("ERROR", "Potentially invalid KV blocks for unrecognized request %s were retrieved by a decode "
                 "worker. They may have expired.", request_id, prefix=self.prefix, where="nixl_connector.py:1090")
        if faults.has("kv_corrupt_blocks"):
            data = [_corrupt(b) for b in data]
        return {"status": "DONE", "blocks": [b.hex() for b in data]}

    # ---- decode side --------------------------------------------------------------------------

    def pull(self, params):
        """Read the prefill's blocks; return them, or raise TransferError (handshake or transfer)."""
        host, port = params["remote_host"], int(params["remote_port"])
        engine = params["remote_engine_id"]
        peer = self._peer(host, port, engine, params)
        started = time.perf_counter()
        if faults.has("kv_transfer_fail"):
            raise TransferError("transfer_failed", "xfer_state=ERR: NIXL_ERR_BACKEND (narwhal fault kv_transfer_fail)")
        try:
            reply = _exchange(host, port, {"op": "read", "agent_name": peer["agent_name"],
                                           "remote_request_id": params.get("remote_request_id"),
                                           "block_ids": params.get("remote_block_ids") or []})
        except (OSError, ValueError) as exc:
            raise TransferError("transfer_exception", f"{type(exc).__name__}: {exc}") from None
        if reply.get("status") != "DONE":
            raise TransferError("transfer_failed", f"xfer_state=ERR: {reply.get('error')}")
        data = [bytes.fromhex(b) for b in reply["blocks"]]
        if faults.has("kv_corrupt_blocks"):
            data = [_corrupt(b) for b in data]
        if self.metrics:
            self.metrics.record_transfer(len(data) * self.block_bytes, time.perf_counter() - started)
        return data

    def _peer(self, host, port, engine, params):
        # vLLM caches the handshake per remote engine id. stale_peer_metadata keys it by address instead,
        # so a prefill restarted on the same host:port keeps being addressed through its old agent (#49238).
        key = f"{host}:{port}" if faults.has("kv_stale_peer_metadata") else engine
        with self.lock:
            if key in self.peers:
                return self.peers[key]
        try:
            meta = _exchange(host, port, None)
        except (OSError, ValueError) as exc:
            raise TransferError("handshake_failed", f"{type(exc).__name__}: {exc}") from None
        local = compatibility_hash(self.factors)
        if meta.get("compatibility_hash") != local:
            raise TransferError("handshake_failed", (
                f"RuntimeError: NIXL compatibility hash mismatch. Local: {local}, Remote: "
                f"{meta.get('compatibility_hash')}. Prefill and decode instances have incompatible configurations. "
                "This may be due to: different vLLM versions, models, dtypes, KV cache layouts, attention backends, "
                "etc. Both instances must use identical configurations.Disable this check using --kv-transfer-config "
                "'{\"kv_connector_extra_config\": {\"enforce_handshake_compat\": false}}'"))
        emit("INFO", "NIXL compatibility check passed (hash: %s)", meta["compatibility_hash"], prefix=self.prefix,
             where="nixl_connector.py:760")
        _check_layout(self.base_handshake, meta)
        if meta.get("engine_id") != engine:
            raise TransferError("handshake_failed", f"RuntimeError: Remote NIXL agent engine ID mismatch. "
                                f"Expected {engine},received {meta.get('engine_id')}.")
        with self.lock:
            self.peers[key] = meta
        return meta

    def log_failure(self, error, request_id, params):
        context = {"failure_type": error.kind, "request_id": request_id, "engine_id": self.engine_id,
                   "remote_engine_id": params.get("remote_engine_id"),
                   "remote_request_id": params.get("remote_request_id"), "remote_host": params.get("remote_host"),
                   "remote_port": params.get("remote_port"),
                   "num_remote_blocks": len(params.get("remote_block_ids") or [])}
        suffix = ". Marking blocks as invalid" if error.kind != "handshake_failed" else ""
        emit("ERROR", "NIXL transfer failure: %s%s | Context: %s", error.kind, suffix, context, prefix=self.prefix,
             where="nixl_connector.py:1263")
        emit("ERROR", "%s", error, prefix=self.prefix, where="nixl_connector.py:1263")


def _check_layout(local, remote):
    """vLLM 0.11 add_remote_agent after the hash: tp_ratio = divide(decode TP, prefill TP) asserts divisibility
    (so a prefill of larger TP is refused; later vLLM added that direction), then equal block sizes."""
    local_tp, remote_tp = int(local.get("tp_size") or 1), int(remote.get("tp_size") or 1)
    if local_tp % remote_tp:
        raise TransferError("handshake_failed", f"AssertionError: {local_tp} is not divisible by {remote_tp}")
    if remote.get("block_size") != local.get("block_size"):
        raise TransferError("handshake_failed", "AssertionError: Remote P worker with different block size is not "
                            f"supported self.block_size={local.get('block_size')} "
                            f"remote_block_size={remote.get('block_size')}")


def _corrupt(block):
    return bytes([block[0] ^ 0xFF]) + block[1:] if block else block


def _exchange(host, port, request):
    """One side-channel connection: read the handshake line, optionally send a request and read its reply."""
    with socket.create_connection((host, port), timeout=READ_TIMEOUT) as sock:
        reader = sock.makefile()
        handshake = json.loads(reader.readline())
        if request is None:
            return handshake
        sock.sendall((json.dumps(request) + "\n").encode())
        return json.loads(reader.readline())
