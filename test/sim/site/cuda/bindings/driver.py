"""Stand-in for `cuda.bindings.driver` (cuda-python): cuInit, cuDeviceGetCount, cuDeviceGet,
cuDeviceGetUuid and cuDeviceGetPCIBusId, returning (CUresult, value...) tuples as cuda-python does.

Like the real driver, cuInit reads CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER once, and the
devices are enumerated in the runtime's order (narwhal_sim_gpus: the simulated node's GPUs).
"""
import enum

from narwhal_sim_gpus import GPUS, visible


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_DEVICE = 101


class CUdevice(int):
    pass


class CUuuid:
    def __init__(self, raw):
        self.bytes = raw


_devices = None


def cuInit(flags):
    global _devices
    if flags != 0:
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    if _devices is None:
        _devices = visible()
    return (CUresult.CUDA_SUCCESS,)


def cuDeviceGetCount():
    if _devices is None:
        return CUresult.CUDA_ERROR_NOT_INITIALIZED, 0
    return CUresult.CUDA_SUCCESS, len(_devices)


def cuDeviceGet(ordinal):
    if _devices is None:
        return CUresult.CUDA_ERROR_NOT_INITIALIZED, CUdevice(0)
    if not 0 <= ordinal < len(_devices):
        return CUresult.CUDA_ERROR_INVALID_DEVICE, CUdevice(0)
    return CUresult.CUDA_SUCCESS, CUdevice(ordinal)


def _gpu(dev):
    return GPUS[_devices[dev]] if _devices is not None and 0 <= dev < len(_devices) else None


def cuDeviceGetUuid(dev):
    gpu = _gpu(dev)
    if gpu is None:
        return CUresult.CUDA_ERROR_INVALID_DEVICE, None
    return CUresult.CUDA_SUCCESS, CUuuid(bytes.fromhex(gpu[2][len("GPU-"):].replace("-", "")))


def cuDeviceGetPCIBusId(length, dev):
    gpu = _gpu(dev)
    if gpu is None:
        return CUresult.CUDA_ERROR_INVALID_DEVICE, b""
    return CUresult.CUDA_SUCCESS, gpu[0].encode()[: length - 1]
