"""Stand-in for ``nixl._api``: vLLM's NixlConnector imports ``nixl_agent`` from here.

The fault switch ``no_nixl`` makes this import fail the way a missing or broken
native NIXL build does.
"""
import narwhal_sim_faults

if narwhal_sim_faults.has("no_nixl"):
    raise ImportError("libnixl.so: cannot open shared object file: No such file or directory")


class nixl_agent_config:  # noqa: N801 - real name
    def __init__(self, enable_prog_thread=True, enable_listen_thread=False, listen_port=0,
                 capture_telemetry=False, num_threads=0, backends=("UCX",)):
        self.enable_prog_thread = enable_prog_thread
        self.backends = list(backends)
        self.num_threads = num_threads


class nixl_agent:  # noqa: N801 - real name
    """Holds registered memory descriptors; transfers are not simulated here."""

    def __init__(self, agent_name, nixl_conf=None, instantiate_all=False):
        self.name = agent_name
        self.config = nixl_conf or nixl_agent_config()
        self.backends = {name: {} for name in self.config.backends}
        self.registered = []

    def get_plugin_list(self):
        return ["UCX", "GDS", "POSIX"]

    def register_memory(self, descs, mem_type=None, backends=None):
        self.registered.append(descs)
        return descs

    def get_agent_metadata(self):
        return ("nixl-sim:" + self.name).encode()
