"""The simulated node's GPUs, as nvidia-smi lists them and as a CUDA process enumerates them.

One place for both views, so `bin/nvidia-smi` (PCI bus order, and the memory each
simulator holds) and the CUDA driver stand-in (`cuda.bindings.driver`) agree on which
physical GPU a process's CUDA_VISIBLE_DEVICES selects.

CUDA enumerates devices FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID; nvidia-smi
always lists them in PCI bus order. Two identical H100s tie, and CUDA breaks the tie by
bus id, so by default both orders agree. `NARWHAL_SIM_CUDA_FASTEST_FIRST=1,0` (nvidia-smi
indices, fastest first) gives the runtime another order, as a mixed or throttled node does.

CUDA_VISIBLE_DEVICES is read as the CUDA driver and torch's `_parse_visible_devices` read
it: entries are ordinals in the runtime's order or `GPU-` UUIDs / UUID prefixes; the list
ends at the first entry that names no device (out of range, no match, an ambiguous prefix,
anything else), and a device named twice hides every device.
"""
import os

# (PCI bus id, name, UUID) in nvidia-smi's (PCI bus) order: test/fixtures/hosts/h100x2.
GPUS = [("00000000:18:00.0", "NVIDIA H100 80GB HBM3", "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b"),
        ("00000000:2A:00.0", "NVIDIA H100 80GB HBM3", "GPU-9e8d7c6b-5a4f-4e2d-8c0b-a9f8e7d6c5b4")]
ORDER_SWITCH = "NARWHAL_SIM_CUDA_FASTEST_FIRST"


def runtime_order(env=None):
    """nvidia-smi indices in the order a CUDA process with this environment enumerates them."""
    env = os.environ if env is None else env
    pci = list(range(len(GPUS)))
    if env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") == "PCI_BUS_ID":
        return pci
    raw = env.get(ORDER_SWITCH, "").strip()
    if not raw:
        return pci
    order = [int(x) for x in raw.split(",") if x.strip().isdigit()]
    if sorted(order) != pci:
        raise ValueError(f"{ORDER_SWITCH}={raw} must list every nvidia-smi index 0..{len(GPUS) - 1} once")
    return order


def _entry(entry, order):
    """One CUDA_VISIBLE_DEVICES entry -> nvidia-smi index, or None when it names no single device."""
    if entry.isdigit():
        return order[int(entry)] if int(entry) < len(order) else None
    if not entry.startswith("GPU-"):
        return None
    matches = [i for i in order if GPUS[i][2].startswith(entry)]
    return matches[0] if len(matches) == 1 else None


def visible(env=None):
    """nvidia-smi indices of the devices a CUDA process with this environment sees, in its ordinal order."""
    env = os.environ if env is None else env
    order = runtime_order(env)
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return order
    seen = []
    for entry in raw.split(","):
        index = _entry(entry.strip(), order)
        if index is None:
            break
        if index in seen:
            return []
        seen.append(index)
    return seen
