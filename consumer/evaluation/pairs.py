"""The short-text check of the evaluation: labelled sentence pairs as a feed.

The sets in `../shared/data/pairs/` hold short texts (questions, one-sentence news) whose pairs
share most of their words yet often say different things. As a feed, both texts of every pair
arrive at the same moment, one after the other; every flag a system raises is then judged:

* wrong when it joins the two texts of a pair labelled as different (anything below the set's
  highest label): the sets' own judgement overrides any measure of overlap;
* otherwise right when the two texts share enough, by the same rule as the main evaluation
  (Jaccard of shingles ≥ 0.5: an exact repost, which these sets also contain across pairs, or
  the same sentence reworded), and wrong when they do not.

Precision is right flags over all flags; what a system does with the pairs labelled different is
counted apart, because that is where short-text policies fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from consumer.corpus import iter_jsonl
from consumer.errors import InputError
from consumer.evaluation import truth
from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.runs import SystemRun

_WHEN = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class PairFeed:
    articles: list[FeedArticle]  # a then b, pair after pair
    same: dict[str, bool]  # pair id -> labelled as meaning the same
    short_share: float  # share of texts under 60 characters


@dataclass(frozen=True, slots=True)
class PairScores:
    system: str
    articles: int
    seconds: float
    flagged: int
    right: int
    flagged_different: int  # flags joining the two texts of a pair labelled different
    pairs_different: int
    error: str | None = None

    @property
    def precision(self) -> float | None:
        return self.right / self.flagged if self.flagged else None

    @property
    def articles_per_second(self) -> float | None:
        return self.articles / self.seconds if self.seconds > 0 and not self.error else None


def load_pairs(path: str | Path, limit: int | None = None) -> PairFeed:
    rows = list(iter_jsonl(path, limit))
    if not rows or not all({"id", "a", "b", "label"} <= set(r) for r in rows):
        raise InputError(f"{path}: expected JSONL lines with id, a, b and label")
    top = max(r["label"] for r in rows)
    articles: list[FeedArticle] = []
    same: dict[str, bool] = {}
    for r in rows:
        pid = str(r["id"])
        same[pid] = r["label"] == top
        for side in ("a", "b"):
            articles.append(FeedArticle(f"{pid}/{side}", "", str(r[side]), _WHEN))
    short = sum(len(a.content) < 60 for a in articles)
    return PairFeed(articles, same, short / len(articles))


def _pair_of(article_id: str) -> str:
    return article_id.rsplit("/", 1)[0]


def score_pairs(run: SystemRun, feed: PairFeed) -> PairScores:
    if run.error is not None:
        return PairScores(run.system, 0, run.seconds, 0, 0, 0, 0, run.error)
    texts = {a.id: a.text for a in feed.articles}
    flagged = right = flagged_different = 0
    for d in run.decisions:
        if not d.flagged or d.matched_id is None:
            continue
        flagged += 1
        partners = _pair_of(d.id) == _pair_of(d.matched_id)
        if partners and not feed.same[_pair_of(d.id)]:
            flagged_different += 1
            continue
        right += truth.similarity(texts[d.id], texts[d.matched_id]) >= truth.MATCH_JACCARD
    different = sum(not s for s in feed.same.values())
    return PairScores(
        run.system,
        len(run.decisions),
        run.seconds,
        flagged,
        right,
        flagged_different,
        different,
    )


# Width of the system column: its longest name, "minhash-verified".
_W = 16


def pairs_report_text(path: str, feed: PairFeed, scores: Sequence[PairScores]) -> str:
    lines = [
        f"pairs: {path}",
        f"feed: {len(feed.same):,} pairs as {len(feed.articles):,} texts "
        f"({feed.short_share:.0%} under 60 characters)",
        "",
        f"{'system':<{_W}} {'precision':>9} {'flagged':>8} {'wrong':>6} "
        f"{'different pairs flagged':>24} {'art/s':>8}",
    ]
    for s in scores:
        if s.error:
            lines.append(f"{s.system:<{_W}} failed: {s.error}")
            continue
        precision = "—" if s.precision is None else f"{s.precision:.3f}"
        rate = "—" if s.articles_per_second is None else f"{s.articles_per_second:,.0f}"
        lines.append(
            f"{s.system:<{_W}} {precision:>9} {s.flagged:>8,} {s.flagged - s.right:>6,} "
            f"{f'{s.flagged_different:,} of {s.pairs_different:,}':>24} {rate:>8}"
        )
    return "\n".join(lines)


def pairs_report_json(path: str, feed: PairFeed, scores: Sequence[PairScores]) -> dict:
    return {
        "pairs": path,
        "pair_count": len(feed.same),
        "texts": len(feed.articles),
        "short_share": feed.short_share,
        "systems": [
            {
                "system": s.system,
                "precision": s.precision,
                "flagged": s.flagged,
                "wrong": s.flagged - s.right,
                "different_pairs_flagged": s.flagged_different,
                "different_pairs": s.pairs_different,
                "articles_per_second": s.articles_per_second,
                "error": s.error,
            }
            for s in scores
        ],
    }
