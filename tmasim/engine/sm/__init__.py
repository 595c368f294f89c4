"""The SM's units: the TMA copy engine, the tensor cores, the vector units and the mbarrier."""
