"""Stand-in for NVIDIA NIXL's Python package (dist ``nixl``)."""
__version__ = "0.6.1"
