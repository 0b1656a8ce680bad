"""KVConnectorFactory as in vLLM 0.11: a lazy registry of name -> (module, class).

``get_connector_class(kv_transfer_config)`` reads ``kv_connector`` and, for names
not registered, ``kv_connector_module_path``; unknown names raise
``ValueError("Unsupported connector type: <name>")``. Only NixlConnector has a
stand-in module here; the real registry also lists SharedStorageConnector,
P2pNcclConnector, LMCacheConnectorV1 and MultiConnector.
"""
import importlib
from typing import Callable

from vllm.distributed.kv_transfer.kv_connector.base import KVConnectorBase, KVConnectorBaseType
from vllm.logger import init_logger

logger = init_logger(__name__)


class KVConnectorFactory:
    _registry: dict[str, Callable[[], type[KVConnectorBase]]] = {}

    @classmethod
    def register_connector(cls, name: str, module_path: str, class_name: str) -> None:
        """Register a connector with a lazy-loading module and class name."""
        if name in cls._registry:
            raise ValueError(f"Connector '{name}' is already registered.")

        def loader() -> type[KVConnectorBase]:
            module = importlib.import_module(module_path)
            return getattr(module, class_name)

        cls._registry[name] = loader

    @classmethod
    def create_connector(cls, config, role):
        kv_transfer_config = config.kv_transfer_config
        connector_cls = cls.get_connector_class(kv_transfer_config)
        logger.info("Creating v1 connector with name: %s and engine_id: %s",
                    connector_cls.__name__, getattr(kv_transfer_config, "engine_id", None))
        return connector_cls(config, role)

    @classmethod
    def get_connector_class(cls, kv_transfer_config) -> type[KVConnectorBaseType]:
        """Get the connector class by name."""
        connector_name = kv_transfer_config.kv_connector
        if connector_name in cls._registry:
            connector_cls = cls._registry[connector_name]()
        else:
            connector_module_path = getattr(kv_transfer_config, "kv_connector_module_path", None)
            if connector_module_path is None:
                raise ValueError(f"Unsupported connector type: {connector_name}")
            connector_module = importlib.import_module(connector_module_path)
            connector_cls = getattr(connector_module, connector_name)
        return connector_cls


KVConnectorFactory.register_connector(
    "NixlConnector",
    "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector",
    "NixlConnector")
