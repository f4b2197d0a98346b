"""Draw BENCHMARKS.md's plots from benchmarks/figures.toml into benchmarks/plots/.

Run from the checkout with the project's environment: `.venv/bin/python benchmarks/plots.py`.
The drawings are SVG with no date and a fixed id salt, so the same figures draw the same
bytes and a test can tell a stale drawing from a current one.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
FIGURES = HERE / "figures.toml"
PLOTS = HERE / "plots"
# Identical bytes for identical figures: element ids from this salt, no creation date.
matplotlib.rcParams["svg.hashsalt"] = "newsdedup-benchmarks"
matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, and searchable
COLOURS = ("#1f6f8b", "#c0c0c0", "#e07b39")


def grouped_bars(ax: plt.Axes, section: dict, field: str, horizontal: bool = False) -> None:
    """One bar per system in each feed's group, `field` holding the systems' values in order;
    the groups are labelled with the feeds' names."""
    names = [f["name"] for f in section["feeds"]]
    systems = section["systems"]
    width = 0.8 / len(systems)
    draw, ticks = (ax.barh, ax.set_yticks) if horizontal else (ax.bar, ax.set_xticks)
    for i, system in enumerate(systems):
        values = [f[field][i] for f in section["feeds"]]
        positions = [at + i * width for at in range(len(names))]
        draw(positions, values, width, color=COLOURS[i], label=system)
    ticks([at + width * (len(systems) - 1) / 2 for at in range(len(names))], names)


def accuracy(section: dict, ax_p: plt.Axes, ax_r: plt.Axes) -> None:
    for ax, field in ((ax_p, "precision"), (ax_r, "recall")):
        grouped_bars(ax, section, field, horizontal=True)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_title(field)
        ax.grid(axis="x", alpha=0.3)
    ax_r.set_yticklabels([])
    ax_p.figure.legend(*ax_p.get_legend_handles_labels(), loc="outside lower center", ncols=3)


def speed(section: dict, ax: plt.Axes) -> None:
    grouped_bars(ax, section, "per_cpu_second")
    ax.set_ylabel("articles per CPU-second")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")


def latency(section: dict, ax: plt.Axes) -> None:
    runs = section["runs"]
    xs = range(len(runs))
    ax.bar([x - 0.2 for x in xs], [r["p50"] for r in runs], 0.4, color=COLOURS[0], label="p50")
    ax.bar([x + 0.2 for x in xs], [r["p99"] for r in runs], 0.4, color=COLOURS[2], label="p99")
    ax.axhline(section["target_ms"], color="black", linestyle="--", linewidth=1, label="p99 target")
    ax.set_xticks(list(xs), [r["name"] for r in runs])
    ax.set_ylabel("ms, decision after input")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")


def scale(section: dict, ax_speed: plt.Axes, ax_rss: plt.Axes) -> None:
    for ax, field, label in (
        (ax_speed, "per_cpu_second", "check+insert per CPU-second, k = 3"),
        (ax_rss, "peak_rss_mib", "peak RSS, MiB"),
    ):
        ax.plot(section["n"], section[field], marker="o", color=COLOURS[0])
        ax.set_xscale("log")
        ax.set_xlabel("live fingerprints")
        ax.set_title(label)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)


def draw(figures: dict, into: Path) -> list[Path]:
    """Every plot of `figures` as an SVG in `into`; the paths written."""
    into.mkdir(parents=True, exist_ok=True)
    plots = []

    def save(fig: plt.Figure, name: str) -> None:
        path = into / f"{name}.svg"
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
        plots.append(path)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5), layout="constrained")
    accuracy(figures["accuracy"], left, right)
    save(fig, "accuracy")
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    speed(figures["speed"], ax)
    save(fig, "speed")
    fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
    latency(figures["latency"], ax)
    save(fig, "latency")
    if figures["scale"]["n"]:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
        scale(figures["scale"], left, right)
        save(fig, "scale")
    return plots


def main() -> int:
    figures = tomllib.loads(FIGURES.read_text(encoding="utf-8"))
    for path in draw(figures, PLOTS):
        print(path.relative_to(HERE.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
