"""Prometheus text for /metrics, shaped like vLLM 0.11 + prometheus_client output.

Family names, label names and the float formatting follow the real exporters;
values are the simulator's own counters. ``missing_metric=NAME`` drops a family.
"""
import os
import platform
import resource
import threading
import time

# vLLM's NixlPromMetrics buckets: 2 KiB .. 8 GiB by powers of four; 5 ms .. 5 s.
BYTE_BUCKETS = [float(2 ** (10 + i)) for i in range(1, 25, 2)]
SECOND_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0]
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")


def go_float(value):
    """prometheus_client's floatToGoString: 1712345678.9 -> '1.7123456789e+09'."""
    value = float(value)
    if value == float("inf"):
        return "+Inf"
    if value == float("-inf"):
        return "-Inf"
    if value != value:
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _proc_stat():
    with open("/proc/self/stat", "rb") as handle:
        return handle.read().split(b")")[-1].split()


def process_start_time():
    """Same source as prometheus_client's ProcessCollector: /proc/stat btime + starttime ticks."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat", "rb") as handle:
        btime = next(float(line.split()[1]) for line in handle if line.startswith(b"btime"))
    return btime + float(_proc_stat()[19]) / ticks


class Metrics:
    def __init__(self, served_name, layout, facts, args, nixl):
        self.lock = threading.Lock()
        self.labels = {"model_name": served_name, "engine": "0"}
        self.layout, self.facts, self.args, self.nixl = layout, facts, args, nixl
        self.start = process_start_time()
        self.created = time.time()
        self.prompt_tokens = self.generation_tokens = 0
        self.success = {"stop": 0, "length": 0, "abort": 0}
        self.nixl_bytes = []
        self.nixl_seconds = []
        self.nixl_failed_transfers = self.nixl_failed_notifications = self.nixl_kv_expired = 0
        self.prompt_by_source = dict.fromkeys(PROMPT_SOURCES, 0)

    def record_completion(self, prompt_tokens, generated, reason):
        with self.lock:
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += generated
            self.success[reason] = self.success.get(reason, 0) + 1

    def record_transfer(self, nbytes, seconds):
        with self.lock:
            self.nixl_bytes.append(nbytes)
            self.nixl_seconds.append(seconds)

    def record_failed_transfer(self):
        with self.lock:
            self.nixl_failed_transfers += 1

    def record_expired(self):
        with self.lock:
            self.nixl_kv_expired += 1

    def record_prompt_source(self, source, tokens):
        with self.lock:
            self.prompt_by_source[source] += tokens

    def cache_config_labels(self):
        prefix = self.args.enable_prefix_caching
        if prefix is None:
            prefix = not self.facts["ssm"]
        return {
            "block_size": str(self.layout["block_size"]), "cache_dtype": self.facts["cache_dtype"],
            "calculate_kv_scales": "False", "cpu_offload_gb": "0",
            "enable_prefix_caching": str(bool(prefix)), "engine": "0",
            "gpu_memory_utilization": str(self.args.gpu_memory_utilization), "is_attention_free": "False",
            "kv_cache_memory_bytes": "None", "mamba_cache_dtype": "auto", "mamba_ssm_cache_dtype": "auto",
            "num_cpu_blocks": "0", "num_gpu_blocks": str(self.layout["num_gpu_blocks"]),
            "num_gpu_blocks_override": "None", "prefix_caching_hash_algo": "sha256",
            "sliding_window": "None", "swap_space": "4",
        }

    def render(self, missing=(), start_offset=0.0):
        """``start_offset`` shifts process_start_time_seconds: what another process answering here would report."""
        dropped = {m[:-6] if m.endswith("_total") else m for m in missing}
        out = []

        def family(name, kind, doc, samples):
            base = name[:-6] if kind == "counter" and name.endswith("_total") else name
            if base in dropped or name in dropped:
                return
            out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
            for sample, labels, value in samples:
                text = ",".join(f'{k}="{v}"' for k, v in labels.items())
                out.append(f"{sample}{{{text}}} {go_float(value)}\n" if text else f"{sample} {go_float(value)}\n")

        def histogram(name, doc, observed, buckets):
            samples = [(f"{name}_bucket", dict(self.labels, le=go_float(b)), sum(1 for o in observed if o <= b))
                       for b in buckets + [float("inf")]]
            samples += [(f"{name}_count", self.labels, len(observed)), (f"{name}_sum", self.labels, sum(observed))]
            family(name, "histogram", doc, samples)

        stat = _proc_stat()
        ticks = os.sysconf("SC_CLK_TCK")
        with self.lock:
            family("python_info", "gauge", "Python platform information",
                   [("python_info", {"implementation": platform.python_implementation(), "major": "3",
                                     "minor": str(os.sys.version_info.minor), "patchlevel":
                                     str(os.sys.version_info.micro), "version": platform.python_version()}, 1)])
            family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                   [("process_virtual_memory_bytes", {}, float(stat[20]))])
            family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                   [("process_resident_memory_bytes", {}, float(stat[21]) * resource.getpagesize())])
            family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                   [("process_start_time_seconds", {}, self.start + start_offset)])
            family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                   [("process_cpu_seconds_total", {}, (float(stat[11]) + float(stat[12])) / ticks)])
            family("process_open_fds", "gauge", "Number of open file descriptors.",
                   [("process_open_fds", {}, len(os.listdir("/proc/self/fd")))])
            family("process_max_fds", "gauge", "Maximum number of open file descriptors.",
                   [("process_max_fds", {}, resource.getrlimit(resource.RLIMIT_NOFILE)[0])])
            family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                   [("vllm:num_requests_running", self.labels, 0)])
            family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                   [("vllm:num_requests_waiting", self.labels, 0)])
            family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                   [("vllm:kv_cache_usage_perc", self.labels, 0.0)])
            family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                   [("vllm:prompt_tokens_total", self.labels, self.prompt_tokens),
                    ("vllm:prompt_tokens_created", self.labels, self.created)])
            family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
                   [("vllm:generation_tokens_total", self.labels, self.generation_tokens),
                    ("vllm:generation_tokens_created", self.labels, self.created)])
            family("vllm:request_success_total", "counter", "Count of successfully processed requests.",
                   [("vllm:request_success_total", dict(self.labels, finished_reason=r), n)
                    for r, n in sorted(self.success.items())])
            family("vllm:prompt_tokens_by_source_total", "counter", "Number of prompt tokens by source.",
                   [(f"vllm:prompt_tokens_by_source_{suffix}", dict(self.labels, source=source), value)
                    for source in PROMPT_SOURCES
                    for suffix, value in (("total", self.prompt_by_source[source]), ("created", self.created))])
            family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig",
                   [("vllm:cache_config_info", self.cache_config_labels(), 1.0)])
            if self.nixl:
                histogram("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache "
                          "transfers.", self.nixl_seconds, SECOND_BUCKETS)
                histogram("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache "
                          "transfers.", self.nixl_bytes, BYTE_BUCKETS)
                family("vllm:nixl_num_failed_transfers_total", "counter", "Number of failed NIXL KV Cache "
                       "transfers.", [("vllm:nixl_num_failed_transfers_total", self.labels,
                                       self.nixl_failed_transfers)])
                family("vllm:nixl_num_failed_notifications_total", "counter", "Number of failed NIXL KV Cache "
                       "notifications.", [("vllm:nixl_num_failed_notifications_total", self.labels,
                                           self.nixl_failed_notifications)])
                family("vllm:nixl_num_kv_expired_reqs_total", "counter", "Number of requests that had their KV "
                       "expire. NOTE: This metric is tracked on the P instance.",
                       [("vllm:nixl_num_kv_expired_reqs_total", self.labels, self.nixl_kv_expired)])
        return "".join(out)
