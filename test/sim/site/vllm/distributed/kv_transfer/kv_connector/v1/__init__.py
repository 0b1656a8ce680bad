from vllm.distributed.kv_transfer.kv_connector.base import KVConnectorBase_V1, KVConnectorRole  # noqa: F401
