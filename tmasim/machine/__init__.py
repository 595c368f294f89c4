"""The hardware model: the GPU preset (``hardware``), its MMA instructions (``mma``), where an
MMA's operands come from (``operands``), TMA descriptors and boxes (``descriptor``), L2's capacity
and its request merging (``l2``, ``l2_merge``), thread-block clusters (``cluster``) and how many
CTAs fit on an SM (``residency``)."""
