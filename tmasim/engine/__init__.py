"""The engine: SimPy processes that run the workloads' programs on a chip, in rooms by part."""
