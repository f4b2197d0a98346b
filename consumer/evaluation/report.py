"""Presenting an evaluation: a text table, a JSON document and a precision/recall plot."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from consumer.evaluation.metrics import Scores


@dataclass(frozen=True, slots=True)
class TemplateSummary:
    """What page templates a templated feed carries (`newsdedup eval --templates`)."""

    share: float
    corpus_templated: int  # corpus articles in their site's template
    reposts: dict[str, int]  # edited copies per kind: same_site, other_site, none


@dataclass(frozen=True, slots=True)
class FeedSummary:
    data: str
    corpus_articles: int
    edited_copies: int
    undated_skipped: int
    corpus_pairs: int
    edit_pairs: int
    silver_pairs_checked: int
    seed: int
    templates: TemplateSummary | None = None
    true_clusters: int = 0  # connected components of the true pairs (2+ articles each)
    clustered_articles: int = 0  # articles in them


# Width of a system's column: its longest name, "minhash-verified".
_W = 16


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def feed_report_text(feed: FeedSummary, scores: Sequence[Scores]) -> str:
    """The side-by-side comparison, then recall per kind of pair, for a terminal."""
    lines = [
        f"data: {feed.data}",
        f"feed: {feed.corpus_articles:,} corpus articles + {feed.edited_copies:,} edited copies"
        f" (seed {feed.seed}); {feed.undated_skipped:,} undated articles skipped",
        f"true pairs: {feed.corpus_pairs:,} in the corpus (Jaccard ≥ 0.8, exact, of "
        f"{feed.silver_pairs_checked:,} silver candidates) + {feed.edit_pairs:,} edited copies",
        *_template_lines(feed.templates),
        "",
        f"{'system':<{_W}} {'precision':>9} {'recall':>7} {'F1':>6} {'flagged':>8} "
        f"{'wrong':>6} {_template_cell(feed, 'tmpl')}{'missed':>7} {'art/s':>8} "
        f"{'art/CPU-s':>9} {'seconds':>8}",
    ]
    for s in scores:
        if s.error:
            lines.append(f"{s.system:<{_W}} failed: {s.error}")
            continue
        lines.append(
            f"{s.system:<{_W}} {_fmt(s.precision):>9} {_fmt(s.recall):>7} {_fmt(s.f1):>6} "
            f"{s.flagged:>8,} {s.flagged - s.correct:>6,} "
            f"{_template_cell(feed, f'{s.template_flags or 0:,}')}{s.pairs - s.found:>7,} "
            f"{_rate(s.articles_per_second):>8} {_rate(s.articles_per_cpu_second):>9} "
            f"{s.seconds:>8.1f}"
        )
    ok = [s for s in scores if not s.error]
    lines += _cluster_lines(feed, ok)
    kinds = sorted({k for s in ok for k in s.by_kind})
    if kinds:
        lines += ["", "recall by kind of pair:", f"{'kind':<20} {'pairs':>6} " + " ".join(
            f"{s.system:>{_W}}" for s in ok
        )]  # fmt: skip
        for kind in kinds:
            n = max(s.by_kind[kind].pairs for s in ok if kind in s.by_kind)
            cells = " ".join(
                f"{_fmt(s.by_kind[kind].recall if kind in s.by_kind else None):>{_W}}" for s in ok
            )
            lines.append(f"{kind:<20} {n:>6,} {cells}")
    return "\n".join(lines)


def _cluster_lines(feed: FeedSummary, ok: Sequence[Scores]) -> list[str]:
    """Cluster quality per system: pairs of articles in one cluster, against the true ones."""
    measured = [(s.system, s.clusters) for s in ok if s.clusters is not None]
    if not measured:
        return []
    lines = [
        "",
        f"clusters (true: {feed.true_clusters:,} clusters of 2+ holding "
        f"{feed.clustered_articles:,} articles; pair-prec/pair-rec over pairs of articles in "
        "one cluster; ARI adjusted Rand index):",
        f"{'system':<{_W}} {'pair-prec':>9} {'pair-rec':>8} {'ARI':>6} {'clusters':>9}",
    ]
    for system, c in measured:
        lines.append(
            f"{system:<{_W}} {_fmt(c.precision):>9} {_fmt(c.recall):>8} {_fmt(c.ari):>6} "
            f"{c.clusters:>9,}"
        )
    return lines


def _template_cell(feed: FeedSummary, value: str) -> str:
    """The column of template flags, which only a templated feed has."""
    return "" if feed.templates is None else f"{value:>6} "


def _template_lines(templates: TemplateSummary | None) -> list[str]:
    if templates is None:
        return []
    r = templates.reposts
    return [
        f"page templates: {templates.corpus_templated:,} corpus articles "
        f"({templates.share:.0%}) in their site's template; edited copies: "
        f"{r.get('same_site', 0):,} same-site, {r.get('other_site', 0):,} cross-site, "
        f"{r.get('none', 0):,} untemplated reposts; truth compares the untemplated texts "
        "(tmpl: wrong flags between two templated articles)"
    ]


def feed_report_json(feed: FeedSummary, scores: Sequence[Scores]) -> dict:
    """Everything in the text report, as numbers (for tracking and for BENCHMARKS.md)."""
    return {
        "feed": {
            "data": feed.data,
            "corpus_articles": feed.corpus_articles,
            "edited_copies": feed.edited_copies,
            "undated_skipped": feed.undated_skipped,
            "corpus_pairs": feed.corpus_pairs,
            "edit_pairs": feed.edit_pairs,
            "silver_pairs_checked": feed.silver_pairs_checked,
            "seed": feed.seed,
            "templates": None
            if feed.templates is None
            else {
                "share": feed.templates.share,
                "corpus_templated": feed.templates.corpus_templated,
                "reposts": feed.templates.reposts,
            },
            "true_clusters": feed.true_clusters,
            "clustered_articles": feed.clustered_articles,
        },
        "systems": [
            {
                "system": s.system,
                "error": s.error,
                "precision": s.precision,
                "recall": s.recall,
                "f1": s.f1,
                "flagged": s.flagged,
                "wrongly_flagged": s.flagged - s.correct,
                "template_flags": s.template_flags,
                "pairs": s.pairs,
                "missed": s.pairs - s.found,
                "articles": s.articles,
                "seconds": round(s.seconds, 3),
                "articles_per_second": s.articles_per_second,
                "cpu_seconds": None if s.cpu_seconds is None else round(s.cpu_seconds, 3),
                "articles_per_cpu_second": s.articles_per_cpu_second,
                "clusters": _cluster_json(s),
                "recall_by_kind": {
                    k: {"pairs": v.pairs, "found": v.found, "recall": v.recall}
                    for k, v in s.by_kind.items()
                },
            }
            for s in scores
        ],
    }


def _cluster_json(s: Scores) -> dict | None:
    c = s.clusters
    if c is None:
        return None
    return {
        "pair_precision": c.precision,
        "pair_recall": c.recall,
        "adjusted_rand_index": c.ari,
        "clusters": c.clusters,
        "predicted_pairs": c.predicted_pairs,
        "true_pairs": c.true_pairs,
        "agreeing_pairs": c.agreeing_pairs,
    }


def plot(feed: FeedSummary, scores: Sequence[Scores], path: str | Path) -> None:
    """Precision against recall per system, articles per CPU-second per system, and recall
    per kind of pair; each system keeps one colour in all three."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in CI
    import matplotlib.pyplot as plt

    ok = [s for s in scores if not s.error and s.precision is not None and s.recall is not None]
    colour = {s.system: f"C{i % 10}" for i, s in enumerate(ok)}
    kinds = sorted({k for s in ok for k in s.by_kind})
    fig, (left, middle, right) = plt.subplots(
        1, 3, figsize=(17, 5.5), gridspec_kw={"width_ratios": [1.1, 0.8, 2]}, layout="constrained"
    )
    for s in ok:
        # Close systems (a baseline and its verified variant) overlap: a legend, not labels.
        left.scatter(s.recall, s.precision, s=60, color=colour[s.system], label=s.system)
    # Zoomed to the points: the systems compared here differ in the second decimal or less.
    low = min([0.99] + [v for s in ok for v in (s.precision, s.recall) if v is not None])
    margin = (1 - low) * 0.1 + 0.002
    left.set(xlim=(low - margin, 1 + margin), ylim=(low - margin, 1 + margin))
    left.set(xlabel="recall", ylabel="precision")
    left.set_title("precision / recall")
    left.grid(alpha=0.3)
    left.legend(loc="lower left", fontsize="small")
    speeds = [s.articles_per_cpu_second or 0.0 for s in ok]
    middle.barh(range(len(ok)), speeds, color=[colour[s.system] for s in ok])
    middle.set_yticks(range(len(ok)), [s.system for s in ok])
    for y, s in enumerate(ok):
        if s.articles_per_cpu_second is None:  # the service through Kafka: not measured
            middle.annotate("n/a", (0, y), xytext=(4, 0), textcoords="offset points", va="center")
    middle.invert_yaxis()
    middle.set(xlabel="articles per CPU-second")
    middle.set_title("speed")
    middle.grid(axis="x", alpha=0.3)
    width = 0.8 / max(len(ok), 1)
    for i, s in enumerate(ok):
        values = [
            (s.by_kind[k].recall or 0.0) if k in s.by_kind else 0.0 for k in kinds
        ]  # fmt: skip
        right.bar(
            [x + i * width for x in range(len(kinds))],
            values,
            width,
            label=s.system,
            color=colour[s.system],
        )
    right.set_xticks([x + width * (len(ok) - 1) / 2 for x in range(len(kinds))], kinds)
    plt.setp(right.get_xticklabels(), rotation=35, ha="right")
    right.set(ylim=(0, 1.05), ylabel="recall")
    right.set_title("recall by kind of pair")
    right.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(
        f"{Path(feed.data).name}: {feed.corpus_articles:,} articles + "
        f"{feed.edited_copies:,} edited copies"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
