"""Stand-in for NVIDIA's cuda-python (`cuda.bindings`): only the driver calls narwhal's device query makes."""
