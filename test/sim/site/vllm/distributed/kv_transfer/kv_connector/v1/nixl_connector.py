"""NixlConnector stand-in. Like the real module, a missing NIXL only logs at
import time ("NIXL is not available") and fails when a worker is created."""
import uuid

from vllm.distributed.kv_transfer.kv_connector.base import KVConnectorBase_V1, KVConnectorRole
from vllm.logger import init_logger

logger = init_logger(__name__)

try:
    from nixl._api import nixl_agent as NixlWrapper
    from nixl._api import nixl_agent_config
    logger.info("NIXL is available")
except ImportError:
    logger.warning("NIXL is not available")
    NixlWrapper = None
    nixl_agent_config = None

KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
# Bumped by vLLM when the NIXL handshake metadata changes incompatibly; part of the handshake policy.
NIXL_CONNECTOR_VERSION = 1
LOAD_FAILURE_POLICIES = ("recompute", "fail")


class NixlConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role):
        super().__init__(vllm_config, role)
        self.engine_id = getattr(vllm_config.kv_transfer_config, "engine_id", None) or str(uuid.uuid4())
        self.agent = None
        if role == KVConnectorRole.WORKER:
            if NixlWrapper is None:
                logger.error("NIXL is not available")
                raise RuntimeError("NIXL is not available")
            extra = getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", {}) or {}
            backends = extra.get("backends", ["UCX"])
            self.agent = NixlWrapper(str(uuid.uuid4()), nixl_agent_config(backends=backends))
