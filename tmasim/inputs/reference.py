"""The scenario-file reference page (docs/reference/scenario.md), written from the field definitions.

Each table's fields come from its frozen dataclass (``Pipeline``, ``RunOptions`` and each
workload's config), their defaults from the dataclass, their rules from the checks the
dataclass runs on construction (``read.integer(..., minimum=, maximum=)``, ``read.choice``,
``read.checked_time``...), their one-line meaning from the field's own comment, and their role
from :mod:`tmasim.field_roles`. Nothing here is typed twice, so the page cannot drift: a test
compares the committed page with what :func:`page` writes.

``python -m tmasim.inputs.reference`` rewrites the page.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tmasim.inputs import field_roles
from tmasim.values import format as fmt

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "scenario.md"
CHECK = re.compile(r'read\.(\w+)\(\s*f?"(?P<table>\w+)\.(?P<name>\w+)(?:\[\{?\w*\}?\])?"\s*,[^,]*?'
                   r'(?:,\s*(?P<rest>[^\n]*))?$', re.MULTILINE)
KIND_OF = {"integer": "whole number", "boolean": "true or false", "choice": "one of",
           "time": "time", "checked_time": "time", "check_time_spec": "time", "time_spec": "time",
           "size": "size", "checked_size": "size", "quantity": "time per byte",
           "checked_quantity": "time per byte", "text": "text"}
COMMENT = re.compile(r"^\s+(\w+): [^=#]+?(?:= [^#]*)?#\s*(?P<comment>.+)$")


def _checks(cls: type, module: ModuleType, table: str) -> dict[str, str]:
    """field name -> its rule, read from the calls in ``cls.__post_init__``."""
    try:
        source = inspect.getsource(cls.__post_init__)  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError):
        return {}
    names = {f.name for f in dataclasses.fields(cls)}
    rules: dict[str, str] = {}
    loop: list[str] = []
    for line in source.splitlines():
        if re.match(r"\s*for \w+(, \w+)* in ", line) and '"' in line:
            loop = re.findall(r'"(\w+)"', line)
        for match in re.finditer(r'read\.(\w+)\(\s*f?"' + table + r'\.(\{\w+\}|\w+)', line):
            function, name = match.group(1), match.group(2)
            for target in (loop if name.startswith("{") else [name]):
                if target in names and target not in rules:
                    rules[target] = _rule(function, line[match.end():], module)
    return rules


def _rule(function: str, rest: str, module: ModuleType) -> str:
    kind = KIND_OF.get(function, function)
    if function == "choice":
        constant = re.search(r",\s*([A-Z_][A-Z0-9_]*|tuple\((\w+)\)|\([^)]*\))", rest)
        if constant:
            options = _value(constant.group(2) or constant.group(1), module)
            if isinstance(options, (tuple, list, dict)):
                return "one of " + ", ".join(f"`{o}`" for o in options)
        return "a choice"
    bounds = []
    for side, word in (("minimum", "at least"), ("maximum", "at most")):
        found = re.search(side + r"=([\w*\- ]+?)(?:[,)]|$)", rest)
        if found:
            value = _value(found.group(1).strip(), module)
            bounds.append(f"{word} {value:,}" if isinstance(value, int) else f"{word} {found.group(1).strip()}")
    return ", ".join([kind, *bounds])


def _value(text: str, module: ModuleType) -> Any:
    try:
        return eval(text, vars(module))  # noqa: S307 - constants of our own modules, as written there
    except Exception:  # noqa: BLE001 - shown as written when it is not a plain constant
        return text


def _comments(cls: type) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in inspect.getsource(cls).splitlines():
        match = COMMENT.match(line)
        if match:
            found[match.group(1)] = match.group("comment").strip()
    return found


def _default(f: dataclasses.Field[Any], rule: str) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None:
        return "(derived)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if rule.startswith("time") and isinstance(value, int):
        return f"`{fmt.time(value)}`"
    if rule.startswith("size") and isinstance(value, int):
        return f"`{fmt.size(value)}`"
    if isinstance(value, tuple):
        return "`[" + ", ".join("none" if v is None else str(v) for v in value) + "]`"
    if dataclasses.is_dataclass(value):
        return "off"
    return f'`"{value}"`' if isinstance(value, str) else f"`{value}`"


def _rows(cls: type, module: ModuleType, table: str, kind: str | None) -> list[str]:
    rules, comments = _checks(cls, module, table), _comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in ("kind", "raw", "origin", "stages_auto"):  # stages_auto: set by reading stages = "auto"
            continue
        rule = rules.get(f.name, "see below" if dataclasses.is_dataclass(f.default) else "")
        role = field_roles.role(f"{table}.{f.name}", kind)
        meaning = comments.get(f.name, MEANINGS.get(f"{table}.{f.name}", "")).replace("|", "/")
        rows.append(f"| `{table}.{f.name}` | {_default(f, rule)} | {rule} | {role} | {meaning} |")
    return rows


# The meaning of the fields whose definition carries no comment of its own (the definition's
# comment, where there is one, wins).
MEANINGS = {
    "workload.tiles": "how many tiles the pipeline streams",
    "workload.load": "the copy engine's busy time per tile: one time, a list (one per tile) or a distribution",
    "workload.compute": "the consumer's compute time per tile: one time, a list or a distribution",
    "workload.latency": "delay before each copy's transfer, overlapping other copies",
    "workload.tile_bytes": "what each copy carries (the barrier's byte count, and bytes/s)",
    "workload.dtype": "element type (GEMM and attention: the preset's dense tensor rate for it)",
    "workload.box": "the TMA box of each copy (16-byte rows, at most 256 elements a side)",
    "workload.launch": "`persistent` (a resident grid loops over work units) or `grid` (one CTA per unit, in waves)",
    "workload.ctas_per_sm": "CTAs per SM (default: as many as fit)",
    "workload.m": "rows of A and C", "workload.n": "columns of B and C", "workload.k": "the reduction dimension",
    "workload.out_dtype": "element type of C (default: bf16, fp32 for tf32); fp8 is e4m3, 1 byte an element: the "
                          "store's bytes and the epilogue's shared memory halve against 16 bits",
    "workload.tile": "GEMM: [BM, BN, BK], an A box BM x BK and a B box BN x BK per k-step; attention: [query rows per"
                     " CTA, key rows per block]",
    "workload.raster": "the order output tiles are walked: `row`, `column` or `grouped` (bands of `group` tile rows)",
    "workload.group": "tile rows per band of the grouped raster",
    "workload.epilogue_smem": "shared memory the epilogue stages C in (default: what the tile needs)",
    "workload.l2_reuse": "whether CTAs that share an operand panel read it from L2 once",
    "workload.batch": "sequences", "workload.heads": "query heads",
    "workload.seqlen_q": "query rows per sequence", "workload.head_dim": "head dimension of Q and K",
    "workload.causal": "causal masking (halves the FLOPs and unbalances the work)",
    "workload.softmax_overlap": "overlap the softmax inside a warpgroup with its next block's MMAs (FA3)",
    "pipeline.stages": "shared-memory slots of the stage ring; `\"auto\"` (gemm): the count CUTLASS would choose "
                       "(Blackwell: the CuTeDSL dense_gemm_persistent rule; Hopper: StageCountAutoCarveout)",
    "pipeline.consumers": "consumer warpgroups",
    "pipeline.consumer_mode": "`cooperative` (each consumer computes its share of a tile) or `pingpong` (whole tiles in"
                              " turn)",
    "pipeline.consumer_waits_full": "false: skip the full-barrier wait, to see the races it causes",
    "pipeline.full_arrivals": "arrivals a full barrier expects (default 1; set only to study synchronization bugs)",
    "pipeline.empty_arrivals": "arrivals an empty barrier expects (default: the consumers; for synchronization bugs)",
    "pipeline.expect_tx": "bytes the producer announces (default: the stage's copies; for synchronization bugs)",
    "run.seed": "one random stream per source, spawned from this seed",
    "run.records": "false: summary only (sweeps), no per-event tables",
    "run.aggregate": "simulate one representative per class of identical SMs or clusters (exact)",
}

HEADER = "| field | default | rule | role | meaning |\n|---|---|---|---|---|"


def _tables() -> list[tuple[str, str | None, type, ModuleType]]:
    from tmasim.inputs import scenario
    from tmasim.workloads import WORKLOADS

    found: list[tuple[str, str | None, type, ModuleType]] = []
    for kind, workload in WORKLOADS.items():
        config = next(v for v in vars(workload).values()
                      if isinstance(v, type) and dataclasses.is_dataclass(v) and getattr(v, "kind", None) == kind)
        found.append((f"`[workload]` of kind `{kind}`", kind, config, sys.modules[config.__module__]))
    found.append(("`[pipeline]`", None, scenario.Pipeline, scenario))
    found.append(("`[run]`", None, scenario.RunOptions, scenario))
    return found


def page() -> str:
    """The reference page's Markdown, as the field definitions say today."""
    parts = ["# Scenario-file reference", "",
             "<!-- Generated by `python -m tmasim.inputs.reference` from the field definitions;"
             " do not edit by hand. -->", "",
             "Every field a scenario file (or `--set FIELD=VALUE`) may set, by table. *Default* is the",
             "value a field takes when the file leaves it out (*required*: it must be given; *(derived)*:",
             "computed from the other fields, as the meaning says). *Rule* is what the field is checked",
             "against when the scenario is built. *Role* is what the field is to a sweep's answer",
             "(`tmasim/inputs/field_roles.py`): *problem* changes the work, *design* changes how it is done,",
             "*noise* changes only the draw or the bookkeeping.", "",
             "Times are written with a unit (`\"3 us\"`, `\"690 cycles\"`), sizes too (`\"16 KiB\"`); a time",
             "field of the `tiles` workload also takes a list (one per tile) or a distribution",
             "(`{ dist = \"normal\", mean = \"3 us\", std = \"0.3 us\" }`).", "",
             "## Top level", "", HEADER,
             f"| `name` | `\"unnamed\"` | text | {field_roles.role('name')} |"
             " the scenario's name, shown on every output |",
             f"| `description` | `\"\"` | text | {field_roles.role('description')} | one line shown under the name |",
             f"| `gpu` | `\"ideal\"` | a preset name, a preset file, or a table | {field_roles.role('gpu')} |"
             " the machine:"
             " `tmasim presets` lists them, `tmasim presets NAME` shows every value with its source; a table"
             " `{ preset = \"h100-sxm\", FIELD = VALUE }` overrides single values |",
             f"| `workload.kind` | `\"tiles\"` | {', '.join(f'`{k}`' for k in _kinds())} |"
             f" {field_roles.role('workload.kind')} | which workload the `[workload]` table describes |"]
    for title, kind, cls, module in _tables():
        parts += ["", f"## {title}", "", HEADER, *_rows(cls, module, title.split("`")[1].strip("[]"), kind)]
    parts += ["", "`run.drift` is a table `{ start = \"1 us\", latency_cv = 0.15 }`: each SM starts up to",
              "`start` late and each copy's latency varies by `latency_cv` (off unless set).", "", *_reads()]
    return "\n".join(parts)


def _reads() -> list[str]:
    """What each workload reads, from :mod:`tmasim.inputs.field_use`'s table."""
    from tmasim.inputs import field_use

    kinds = tuple(field_use.READS)
    lines = ["## Fields a workload does not read", "",
             "A `[pipeline]` or `[gpu]` field the workload's plan and engine never read would change nothing,",
             "so giving it is an error (`pipeline.expect_tx: 4096 would be ignored: the attention workload does",
             "not read it (...); remove it`): a `[pipeline]` value other than its default, or a `[gpu]` table's",
             "override other than the preset's own value (a preset itself sets every field). Every workload",
             "reads every `[run]` field and the fields not listed here (`tmasim/inputs/field_use.py`).", "",
             "| field | " + " | ".join(f"`{k}`" for k in kinds) + " |", "|---|" + "---|" * len(kinds)]
    for table, fields in (("pipeline", field_use.PIPELINE_FIELDS), ("gpu", field_use.GPU_FIELDS)):
        for name in fields:
            read = [name in getattr(field_use.READS[k], table) for k in kinds]
            if not all(read):
                lines.append(f"| `{table}.{name}` | " + " | ".join("reads" if r else "—" for r in read) + " |")
    return [*lines, ""]


def _kinds() -> tuple[str, ...]:
    from tmasim.workloads import KINDS

    return KINDS


def main() -> None:
    PAGE.write_text(page(), encoding="utf-8")
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
