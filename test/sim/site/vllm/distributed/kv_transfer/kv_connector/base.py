"""Connector base classes (stand-in for kv_connector/base.py and v1/base.py)."""
import enum


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorBase_V1:  # noqa: N801 - real name
    def __init__(self, vllm_config, role):
        self._vllm_config = vllm_config
        self._role = role

    @property
    def role(self):
        return self._role


KVConnectorBase = KVConnectorBase_V1
KVConnectorBaseType = KVConnectorBase_V1
