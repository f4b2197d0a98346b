"""BENCHMARKS.md's plots are drawn from benchmarks/figures.toml: the committed drawings are
what that file draws today, and the page shows every one of them."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PLOTS = REPO_ROOT / "benchmarks" / "plots"


def _plots_module():
    spec = importlib.util.spec_from_file_location("plots", REPO_ROOT / "benchmarks" / "plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_plots_are_drawn_from_the_figures(tmp_path: Path) -> None:
    plots = _plots_module()
    figures = tomllib.loads((REPO_ROOT / "benchmarks" / "figures.toml").read_text("utf-8"))
    drawn = plots.draw(figures, tmp_path)
    assert {p.name for p in drawn} == {p.name for p in PLOTS.glob("*.svg")}
    for path in drawn:
        committed = PLOTS / path.name
        assert path.read_bytes() == committed.read_bytes(), (
            f"{path.name} is stale: run `.venv/bin/python benchmarks/plots.py`"
        )


def test_benchmarks_shows_every_plot() -> None:
    page = (REPO_ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    for plot in PLOTS.glob("*.svg"):
        assert f"(benchmarks/plots/{plot.name})" in page, f"BENCHMARKS.md does not show {plot.name}"
