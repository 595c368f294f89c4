"""What a run returns: the summary, per-interval spans, per-instant events, and the scenario.

Tables are built lazily from the engine's record columns (pandas is imported here, not in the
engine). Every file written by :meth:`Result.save` sits beside ``scenario.json``, the scenario
that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.engine.pipeline.cta import Race
from tmasim.engine.recorder import EVENT_COLUMNS, SPAN_COLUMNS, Recorder

if TYPE_CHECKING:
    import pandas as pd

    from tmasim.inputs.scenario import Scenario

# Every file `Result.save` and `tmasim run --out` may write into the folder.
RUN_FILES = ("scenario.json", "summary.csv", "spans.csv", "events.csv", "bandwidth.csv", "races.csv", "gantt.png")


@dataclass
class Result:
    scenario: Scenario
    stats: dict[str, Any]
    races: list[Race] = field(default_factory=list)
    recorder: Recorder | None = field(default=None, repr=False)
    link_loads: list[tuple[int, str, float, float]] | None = field(default=None, repr=False)

    @cached_property
    def validated(self) -> str:
        """How well the model did on the validated cases closest to this run: the text of the
        summary's ``validated`` line (tmasim.validation.trust)."""
        from tmasim.output.trust import trust_for

        return trust_for(self.scenario)

    @cached_property
    def summary(self) -> pd.DataFrame:
        """One row: every summary figure (see ``stats``)."""
        import pandas as pd

        return pd.DataFrame([self.stats])

    @cached_property
    def spans(self) -> pd.DataFrame:
        """One row per interval: start_ps, end_ps, sm, cta, lane, kind, tile, stage, bytes."""
        import pandas as pd

        columns = self.recorder.span_columns() if self.recorder is not None else {}
        frame = pd.DataFrame(columns, columns=list(SPAN_COLUMNS))
        frame = frame.sort_values(["start_ps", "sm", "cta", "lane", "tile"], kind="stable", ignore_index=True)
        frame["duration_ps"] = frame["end_ps"] - frame["start_ps"]
        return frame

    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per instant: time_ps, sm, cta, kind, name, tile, stage, phase."""
        import pandas as pd

        columns = self.recorder.event_columns() if self.recorder is not None else {}
        return pd.DataFrame(columns, columns=list(EVENT_COLUMNS)).sort_values(
            ["time_ps", "sm", "cta"], kind="stable", ignore_index=True)

    @cached_property
    def bandwidth(self) -> pd.DataFrame:
        """Each link's load over time (change points): time_ps, link, gbytes_per_s, capacity_gbytes_per_s.
        Empty unless the run was asked to record bandwidth."""
        import pandas as pd

        frame = pd.DataFrame(self.link_loads or [], columns=["time_ps", "link", "load", "capacity"])
        frame["gbytes_per_s"] = frame.pop("load") * 1000.0
        frame["capacity_gbytes_per_s"] = frame.pop("capacity") * 1000.0
        return frame

    @cached_property
    def race_table(self) -> pd.DataFrame:
        import pandas as pd

        columns = ["sm", "cta", "consumer", "tile", "stage", "read_ps", "landed_ps"]
        return pd.DataFrame([vars(r) for r in self.races], columns=columns)

    @property
    def makespan_ps(self) -> int:
        return int(self.stats["makespan_ps"])

    def to_json(self) -> str:
        """The stats as one JSON object, ``valid`` and ``invalid_reason`` first."""
        first = {k: self.stats[k] for k in ("valid", "invalid_reason") if k in self.stats}
        from tmasim.output.read_back import json_text

        return json_text({**first, **self.stats}, default=_jsonable)

    def save(self, out_dir: Path) -> list[Path]:
        """Write summary, spans, events (and races, if any) as CSV beside scenario.json."""
        from tmasim.output.paths import replacing, write_text

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        from tmasim.output.read_back import json_text

        written = [write_text(out_dir / "scenario.json",
                              json_text(self.scenario.to_dict(), indent=2, default=_jsonable) + "\n")]
        tables = {"summary": self.summary, "spans": self.spans, "events": self.events}
        if self.link_loads:
            tables["bandwidth"] = self.bandwidth
        if self.races:
            tables["races"] = self.race_table
        for name, frame in tables.items():
            path = out_dir / f"{name}.csv"
            with replacing(path) as tmp:
                frame.to_csv(tmp, index=False)
            written.append(path)
        return written


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
