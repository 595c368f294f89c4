"""A CTA's GEMM pipeline: the producer and consumers on a stage ring, alone or in a cluster."""
