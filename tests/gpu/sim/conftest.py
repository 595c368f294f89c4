"""The tests in this folder run only under numba's CUDA simulator.

NUMBA_ENABLE_CUDASIM must be set before numba is first imported, so these modules
cannot share a process with tests that use numba's real CUDA target. The main
suite skips collecting them and tests/gpu/test_gpu_simulator.py runs each one in a
subprocess with the variable set. Run them directly with
`NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/gpu/sim`.
"""

from __future__ import annotations

import os

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
collect_ignore_glob = [] if SIMULATOR else ["test_*.py"]
