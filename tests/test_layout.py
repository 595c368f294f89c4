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
    """The scenario module imports the engine nothing (``Drift`` is data in ``tmasim.drift``);
    it reaches the engine's program types only through the workloads it parses."""
    direct = import_graph()["tmasim.scenario"]
    assert not {m for m in direct if m.startswith(("tmasim.engine", "tmasim.summary", "tmasim.simulation"))}


@pytest.mark.parametrize(("module", "must_not_reach"), [
    ("tmasim.workloads", ("tmasim.summary", "tmasim.simulation", "tmasim.review", "tmasim.sweep")),
    ("tmasim.engine", ("tmasim.scenario", "tmasim.summary", "tmasim.review", "tmasim.sweep", "tmasim.cli")),
    ("tmasim.review.report", ("tmasim.simulation", "tmasim.sweep.runner")),
])
def test_data_flows_one_way(module: str, must_not_reach: tuple[str, ...]) -> None:
    """What a module can reach through its imports (transitively): workloads never the summary
    or a runner, the engine nothing above it, the report never a simulation."""
    graph = import_graph()
    reached: set[str] = set()
    todo = [m for m in graph if m == module or m.startswith(module + ".")]
    while todo:
        current = todo.pop()
        for target in graph[current] - reached:
            reached.add(target)
            todo.append(target)
    bad = sorted(m for m in reached for banned in must_not_reach if m == banned or m.startswith(banned + "."))
    assert bad == [], f"{module} reaches {bad}"
