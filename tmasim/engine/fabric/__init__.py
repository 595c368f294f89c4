"""The fabric: shared bandwidth as a flow model (max-min fair rates) and its shortcuts."""
