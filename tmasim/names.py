"""One name per bound, per resource and per traffic figure, defined once.

Every output that names what binds a run or what a figure counts takes the words from here:
the CLI summary, ``explain``, the sweep table and its answer, the HTML report, the figures'
legends and shading, the lessons and the glossary. What binds a run is one field, ``binding``, whose value is the
bound's name as printed (``binding = "round trip"``) in the Python API, the JSON, the tables and
the text alike; the figures' keys stay short and stable (``latency_bound_ns``), and
:func:`bound_key` turns a value back into its key (``bound_key("round trip") == "latency"``).
:data:`BOUNDS` says what each one is called wherever a person reads it.

The one rename to remember: the bound a slot's round trip sets (issue, copy latency, transfer,
compute and two barrier wake-ups, shared by the S stages) is called **round trip**, never
"latency" (the copy latency is only one part of it) nor "slot round trip" nor "bytes in flight".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Name:
    """A thing's name as printed, and its meaning in one line (the glossary's entry)."""

    text: str
    meaning: str


# key (the JSON's ``binding`` and ``*_bound_ns`` / ``*_term_ns`` prefix) -> name.
BOUNDS: dict[str, Name] = {
    "compute": Name("compute", "the tensor cores' work alone: the busiest SM's MMA time (per tile for a "
                               "tile pipeline)"),
    "exponentials": Name("exponentials", "attention's softmax alone: the busiest SM's time on its exp "
                                         "(multi-function) units or its FP32 units, whichever is longer"),
    "copy": Name("copy", "the copy engine's busy time per tile: loads one after another, nothing else"),
    "issue": Name("TMA issue", "the copy engine's cost of taking each request, one at a time"),
    "l2": Name("L2", "every byte that crosses L2 (loads and stores) over its bandwidth"),
    "hbm": Name("HBM", "every byte read from or written to HBM over its bandwidth"),
    "port": Name("SM port", "the busiest SM's bytes through its one ingest port from L2 (a multicast slice "
                            "crosses the port of every CTA it lands in)"),
    "tma": Name("TMA requests", "the busiest SM's row requests (one per row segment of at most 128 B) through its "
                                "TMA unit, at the unit's request rate"),
    "smem": Name("shared memory", "the busiest SM's shared-memory traffic (MMA operand reads and TMA writes) "
                                  "over its shared-memory bandwidth"),
    "latency": Name("round trip", "a slot's round trip (issue, copy latency, transfer, compute, two barrier "
                                  "wake-ups) shared by the S stages: too few bytes in flight (Little's law)"),
    "chain": Name("consumer chain", "one consumer warpgroup's own steps one after another, where nothing overlaps "
                                    "them: a GEMM's MMAs, the shared-memory time each leaves and each tile's "
                                    "epilogue hold-up; attention's GEMMs it waits for, its softmax and rescale, its "
                                    "epilogue"),
}

# Resources a run uses, as the summary, explain and figures call them.
RESOURCES: dict[str, Name] = {
    "tensor cores": Name("tensor cores", "the SM's matrix-multiply units; their busy time is the compute bound"),
    "copy engine": Name("copy engine", "the SM's TMA unit, which moves boxes from global memory into shared memory"),
    "SM port": Name("SM port", "one SM's ingest link from L2, shared by that SM's copies"),
    "L2": Name("L2", "the on-chip cache and the link all SMs share between them and HBM"),
    "HBM": Name("HBM", "the GPU's main memory and its bandwidth, shared by all SMs"),
    "shared memory": Name("shared memory", "on-SM storage (SMEM) that holds the stage slots"),
    "TMEM": Name("TMEM", "Blackwell's Tensor Memory: storage for MMA accumulators, not a copy engine"),
    "registers": Name("registers", "per-thread storage; on Hopper the MMA accumulators live here"),
}

# What each traffic figure of a run counts (JSON key -> name). A byte of a multicast copy
# crosses L2 once and lands in every receiving CTA's shared memory.
TRAFFIC: dict[str, Name] = {
    "l2_bytes": Name("L2 traffic", "bytes that crossed L2: the loads it served (a multicast slice once; a "
                                   "cluster's same-address loads once where they coalesce, B200) plus epilogue "
                                   "stores; the L2 busy share and the L2 bound count these"),
    "memory_bytes": Name("loads", "bytes TMA loads brought into the SMs through their ports (a box past a "
                                  "tensor's edge reads only its inside); more than L2 served where loads coalesce"),
    "store_bytes": Name("stores", "bytes epilogue stores wrote through L2 to HBM"),
    "hbm_bytes": Name("HBM traffic", "bytes read from HBM (loads that missed L2) plus bytes stored to it; the "
                                     "HBM busy share and the HBM bound count these"),
    "bytes": Name("shared-memory bytes", "bytes the copies landed in shared memory: whole boxes, each "
                                         "multicast receiver counted"),
}

# The answers' terms (a sweep's knee, the validation's stage answer), defined once: every text
# that names one says what it is with ``rule``, and every computation takes its tolerance here.
KNEE_TOLERANCE = 0.01
STAGE_ANSWER_TOLERANCE = 0.02


@dataclass(frozen=True)
class Term:
    """An answer's term: its name, the rule that picks it (quoted wherever the term is printed)
    and why it is what it is (the glossary's and the docs' entry)."""

    text: str
    rule: str
    why: str

    @property
    def meaning(self) -> str:
        return f"{self.rule}: {self.why}"


TERMS: dict[str, Term] = {
    "knee": Term("knee", f"the cheapest point within {KNEE_TOLERANCE:.0%} of the best",
                 "fewest stages first, then least shared memory per CTA; what a sweep's answer, its "
                 "figures and the report recommend, because stages and shared memory are what a kernel "
                 "pays with (residency, room for other buffers)"),
    "stage answer": Term("stage answer", f"the fewest stages within {STAGE_ANSWER_TOLERANCE:.0%} of the best",
                         "what the validation compares, measured against predicted, per stage sweep of a "
                         f"measured table; wider than the knee's {KNEE_TOLERANCE:.0%} so that a measurement's "
                         "run-to-run noise does not decide it"),
}


def term(key: str) -> str:
    """A term with its rule, as printed: ``knee (the cheapest point within 1% of the best)``."""
    return f"{TERMS[key].text} ({TERMS[key].rule})"


# Names that were used for the same things before, and must not come back in any output.
STALE = {
    "slot round trip": "round trip",   # as a bound's name
    "latency bound": "round trip",
    "latency-bound": "round-trip-bound",
    "binding: latency": "binding: round trip",
    "latency binds": "round trip binds",
    "Latency binds": "The round trip binds",
    "latency (bytes in flight)": "round trip",
    "bound by bytes in flight": "bound by round trip",
    "binding: l2": "binding: L2",
    "l2-bandwidth": "L2 bandwidth",
    "SM port/TMA": "SM port or TMA requests",   # two mechanisms, two bounds
}

# Values of ``littles_law_binding`` written before it used the keys above.
_LEGACY = {"HBM": "hbm", "L2": "l2", "SM ports": "port", "SM port": "port", "bytes in flight": "latency"}


def bound_key(value: object) -> str:
    """The key of a bound, from its printed name (a run's ``binding``), its key (a table written
    before ``binding`` held names) or an older name."""
    text = str(value)
    if text in BOUNDS:
        return text
    return next((key for key, name in BOUNDS.items() if name.text == text), _LEGACY.get(text, text))


def bound(value: object) -> str:
    """A bound's name as printed: ``bound("latency")`` is ``"round trip"``."""
    key = bound_key(value)
    return BOUNDS[key].text if key in BOUNDS else str(value)



def binds(name: str) -> str:
    """The verb for a bound's name as printed: "TMA requests bind", "L2 binds"."""
    return "bind" if name == BOUNDS["tma"].text else "binds"
