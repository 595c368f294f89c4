"""The package ships everything it needs: every subpackage, the presets, scenarios and CUDA helpers."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_subpackage_is_listed():
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "tmasim").rglob("__init__.py")}
    found |= {"tmasim.presets", "tmasim.scenarios"}   # data-only folders
    assert found == set(CONFIG["packages"])


def test_data_files_are_declared():
    data = CONFIG["package-data"]
    assert "*.toml" in data["tmasim.presets"] and "*.toml" in data["tmasim.scenarios"]
    assert "*.cu" in data["tmasim.gpu"] and list((REPO / "tmasim" / "gpu").glob("*.cu"))
    assert "units.txt" in data["tmasim"]


def test_lesson_scenarios_ship():
    assert "lessons/*.toml" in CONFIG["package-data"]["tmasim.scenarios"]
    assert len(list((REPO / "scenarios" / "lessons").glob("*.toml"))) == 9
