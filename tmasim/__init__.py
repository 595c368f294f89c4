"""tmasim: a discrete-event simulator of TMA load/compute pipelines on Hopper and Blackwell GPUs."""

__version__ = "0.1.0"
