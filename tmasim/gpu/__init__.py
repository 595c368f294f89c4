"""Optional numba.cuda validation backend: measure real TMA pipelines to check the model.

Kernels (kernels.py) stream tiles through S shared-memory stages with TMA bulk
copies (1-D), tensor-map copies (2-D) or plain loads (the no-TMA baseline),
synchronised by full/empty mbarriers, and timestamp every tile with %globaltimer.
The host driver (driver.py) sweeps stages, tile size, compute length and CTA
count and returns tidy pandas tables; validation/device_check.py runs a small
sweep on a GPU.

Needs the `gpu` extra (numba-cuda, cuda-bindings). Importing this package imports
nothing heavy: numba is loaded only by the submodules that need it, so
`import tmasim` keeps working where the extra is not installed. Under numba's
CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set before numba is imported) the same
kernels run on the CPU with Python stand-ins for the PTX primitives.
"""

from __future__ import annotations

__all__ = ["backend", "driver", "kernels", "launch", "metadata", "params", "probes",
           "reference", "tensormap"]
