"""The house's layout: data flows one way, so the package's import graph has no circle.

Every import counts, the lazy ones inside functions included (they run when the function does).
``if TYPE_CHECKING:`` blocks never run, so the graph of what runs leaves them out; a second graph,
of what a reader (and the type checker) must know, counts them too, and has no circle either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tmasim"


def _module_name(path: Path, root: Path) -> tuple[str, tuple[str, ...]]:
    """(dotted name, the package it sits in) of a file under the package ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), tuple(parts)
    return ".".join(parts), tuple(parts[:-1])


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, typing: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run: module level and inside functions, not under TYPE_CHECKING
    (``typing``: those under TYPE_CHECKING too)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if not typing and isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: Path = PACKAGE, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports. ``from tmasim.x import y`` is an edge to
    ``tmasim.x.y`` when y is a module, else to ``tmasim.x``. ``typing``: the imports under
    ``if TYPE_CHECKING:`` count too."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = {name for name, _ in files}
    graph: dict[str, set[str]] = {}
    for (name, package), path in files.items():
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), typing):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
                continue
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle_through_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "tmasim"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from tmasim.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from tmasim import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tmasim import d\n"
                              "from . import a\n")
    (pkg / "d.py").write_text("import tmasim.c\n")
    graph = import_graph(pkg)
    assert graph["tmasim.a"] == {"tmasim.sub.b"} and graph["tmasim.c"] == {"tmasim.a"}
    assert cycles(graph) == [["tmasim.a", "tmasim.c", "tmasim.sub.b"]]  # d -> c only: no circle through d
    typed = import_graph(pkg, typing=True)
    assert typed["tmasim.c"] == {"tmasim.a", "tmasim.d"}  # the annotation's import counts here
    assert cycles(typed) == [["tmasim.a", "tmasim.c", "tmasim.d", "tmasim.sub.b"]]


def test_the_package_import_graph_has_no_circle() -> None:
    assert cycles(import_graph()) == []


def test_no_circle_through_annotations_either() -> None:
    """Imports for annotations only (``if TYPE_CHECKING:``) count too: a module's types come
    from below it, never from a module that imports it back."""
    assert cycles(import_graph(typing=True)) == []


def test_the_scenario_is_data_and_imports_no_engine() -> None:
    """The scenario module imports the engine nothing (``Drift`` is data in ``tmasim.settings.drift``);
    it reaches the engine's program types only through the workloads it parses."""
    direct = import_graph()["tmasim.inputs.scenario"]
    assert direct  # the module is where this test looks
    assert not {m for m in direct if m.startswith(("tmasim.engine", "tmasim.output", "tmasim.simulation"))}


@pytest.mark.parametrize(("module", "must_not_reach"), [
    ("tmasim.workloads", ("tmasim.output", "tmasim.simulation", "tmasim.review", "tmasim.sweep")),
    ("tmasim.engine", ("tmasim.inputs", "tmasim.output", "tmasim.review", "tmasim.sweep", "tmasim.cli")),
    ("tmasim.review.report", ("tmasim.simulation", "tmasim.sweep.runner")),
])
def test_data_flows_one_way(module: str, must_not_reach: tuple[str, ...]) -> None:
    """What a module can reach through its imports (transitively): workloads never the summary
    or a runner, the engine nothing above it, the report never a simulation."""
    graph = import_graph()
    reached: set[str] = set()
    todo = [m for m in graph if m == module or m.startswith(module + ".")]
    assert todo, f"no module {module}"
    while todo:
        current = todo.pop()
        for target in graph[current] - reached:
            reached.add(target)
            todo.append(target)
    bad = sorted(m for m in reached for banned in must_not_reach if m == banned or m.startswith(banned + "."))
    assert bad == [], f"{module} reaches {bad}"


# The rooms, from the bottom up: a module imports only from its own room and the rooms below it.
# Data flows up: values are read, the chip described, the scenario's parts checked; the engine runs
# the workloads' programs; the scenario parses the workloads; budgets are estimated from the plan;
# results carry the run out; the tools on top (sweeps, reviews, lessons, validation, the command)
# use all of it. Within the tools no order is stated: they call one another (a sweep's answer
# uses the review's columns, the review plots a sweep), and the module graph has no circle there
# either (the tests above).
ROOMS: list[tuple[str, tuple[str, ...]]] = [
    ("words", ("tmasim.errors", "tmasim.version", "tmasim.names", "tmasim.suggest")),
    ("values", ("tmasim.values",)),
    ("hardware model", ("tmasim.machine",)),
    ("scenario parts", ("tmasim.settings",)),
    ("engine", ("tmasim.engine",)),
    ("workloads", ("tmasim.workloads",)),
    ("scenario input", ("tmasim.inputs",)),
    ("budgets and estimates", ("tmasim.estimates",)),
    ("results and formats", ("tmasim.output",)),
    ("the run", ("tmasim.simulation",)),
    ("tools", ("tmasim.sweep", "tmasim.tuning", "tmasim.review", "tmasim.teach", "tmasim.validation", "tmasim.gpu",
               "tmasim.triton", "tmasim.cli", "tmasim.__main__", "tmasim.old_paths", "tmasim")),
]


def room_of(module: str) -> int:
    """The index in ROOMS of the room a module sits in (the longest prefix that names it)."""
    best, length = -1, -1
    for i, (_, prefixes) in enumerate(ROOMS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = i, len(prefix)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a room into a room above it, as a sentence naming both."""
    found = []
    for module in sorted(graph):
        for target in sorted(graph[module]):
            here, there = room_of(module), room_of(target)
            if there > here:
                found.append(f"{module} ({ROOMS[here][0]}) imports {target} ({ROOMS[there][0]}), a room above it")
    return found


def test_every_module_sits_in_a_room() -> None:
    assert [m for m in import_graph() if room_of(m) < 0] == []


@pytest.mark.parametrize("typing", [False, True], ids=["run-time imports", "with annotation imports"])
def test_the_rooms_import_only_downward(typing: bool) -> None:
    """Every import counts, lazy ones inside functions too: a lazy import only delays a circle."""
    assert upward_imports(import_graph(typing=typing)) == []


def test_an_upward_import_is_named() -> None:
    graph = {"tmasim.machine.hardware": {"tmasim.inputs.scenario"}, "tmasim.inputs.scenario": {"tmasim.values.units"}}
    assert upward_imports(graph) == ["tmasim.machine.hardware (hardware model) imports tmasim.inputs.scenario "
                                     "(scenario input), a room above it"]


def test_the_top_floor_holds_only_the_front_and_the_words() -> None:
    """Beside the rooms, the package's top holds its front (the API, the command, a run) and the
    words every room uses; nothing else."""
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "cli", "simulation", "triton", "old_paths", "errors", "version", "names",
                   "suggest"}


def test_no_module_imports_an_old_path() -> None:
    """The package imports its modules where they are; the old paths are for code outside it."""
    from tmasim.old_paths import MOVED

    old = set(MOVED)
    files = {_module_name(p, PACKAGE)[0]: p for p in sorted(PACKAGE.rglob("*.py"))}
    bad = []
    for name, path in files.items():
        for typing in (True,):
            for node in _imports(ast.parse(path.read_text(encoding="utf-8")), typing):
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                else:
                    base = node.module or ""
                    targets = [base, *(f"{base}.{a.name}" for a in node.names)]
                bad += [f"{name} imports {t} (now {MOVED[t]})" for t in targets if t in old]
    assert bad == []


@pytest.mark.parametrize("old", sorted(__import__("tmasim.old_paths").old_paths.MOVED))
def test_an_old_path_is_the_moved_module_itself(old: str) -> None:
    """``import tmasim.scenario`` still works and gives ``tmasim.inputs.scenario`` itself, so
    a monkeypatch or a private name reaches the code that runs."""
    import importlib
    import sys

    from tmasim.old_paths import MOVED

    module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old]) is sys.modules[old] is sys.modules[MOVED[old]]
    assert module.__name__ == MOVED[old]
    parent, _, leaf = old.rpartition(".")
    assert getattr(sys.modules[parent], leaf) is module  # ``from tmasim import scenario`` too
    assert not (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists()  # a rename, for git


def test_an_old_path_runs_as_a_script() -> None:
    """``python -m tmasim.scenario_reference`` runs the moved module's code (runpy asks the
    finder for the code object; running it here would rewrite the page)."""
    from tmasim.old_paths import OldPaths

    spec = OldPaths().find_spec("tmasim.scenario_reference")  # what a fresh ``python -m`` finds
    assert spec is not None and isinstance(spec.loader, OldPaths)
    code = spec.loader.get_code("tmasim.scenario_reference")
    assert code is not None
    assert Path(code.co_filename) == PACKAGE / "inputs" / "reference.py"
    assert Path(spec.origin or "") == PACKAGE / "inputs" / "reference.py"
