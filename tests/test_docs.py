"""The documentation site: the generated scenario reference is current, and the site builds strict."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from tmasim import scenario_reference

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_scenario_reference_is_what_the_generator_writes():
    committed = scenario_reference.PAGE.read_text(encoding="utf-8")
    assert committed == scenario_reference.page(), "run: python -m tmasim.inputs.reference"


def test_the_scenario_reference_lists_every_field_of_every_table():
    from tmasim.workloads import WORKLOADS

    page = scenario_reference.page()
    for kind, workload in WORKLOADS.items():
        for name in workload.FIELDS:
            if name != "kind":
                assert f"| `workload.{name}` |" in page, (kind, name)
    for name in ("pipeline.stages", "pipeline.cluster", "run.seed", "run.drift"):
        assert f"| `{name}` |" in page
    assert "| `pipeline.stages` | `2` | whole number, at least 1" in page
    assert "| `workload.raster` | `\"grouped\"` | one of `row`, `column`, `grouped` | design |" in page


def test_the_readme_is_short_and_starts_with_the_two_set_up_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    blocks = readme.split("```sh\n")[1:3]
    assert blocks[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . && tmasim run\n")
    assert blocks[1].startswith('python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" '
                                "&& python -m pytest\n")
    assert "## How far to trust the numbers" in readme


@pytest.mark.skipif(shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_docs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("material")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_scenario_table_lists_every_bundled_scenario():
    page = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for path in sorted((REPO / "scenarios").glob("*.toml")):
        assert f"`{path.stem}`" in page, path.stem


def test_the_benchmarks_page_lists_every_benchmark_script():
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        if path.stem not in ("checkout", "dump_summaries"):  # the import helper; named in the page's prose
            assert f"| `{path.name}` |" in page, path.name


@pytest.mark.skipif(shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_api_reference_shows_names_and_signatures_and_no_raw_roles(tmp_path: Path) -> None:
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("material")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                   capture_output=True, text=True, timeout=300, check=True,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    html = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    # one line whether or not a formatter (ruff, black) split the signature over lines
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))
    text = re.sub(r",? \)", ")", re.sub(r"\( ", "(", text))
    for name in ("load_scenario", "simulate", "run_sweep"):
        assert f'id="tmasim.{name}"' in html, name
    assert "load_scenario(source: str | Path | None = None, overrides: Iterable[str] = ()) -> Scenario" in text
    assert "simulate(scenario: Scenario, *, allow_large: bool = False) -> Result" in text
    assert not re.search(r":(class|func|meth|mod|attr):", text)
    assert "~tmasim" not in text


def test_the_errors_the_api_page_names_are_importable_from_the_package():
    import tmasim
    from tmasim.errors import ScenarioError, TmasimError

    page = (REPO / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    assert "`tmasim.ScenarioError`" in page
    assert tmasim.ScenarioError is ScenarioError and issubclass(tmasim.ScenarioError, tmasim.TmasimError)
    assert tmasim.TmasimError is TmasimError
