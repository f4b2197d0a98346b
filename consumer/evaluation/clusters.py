"""Cluster quality: how well a system's clusters of articles match the true stories.

The true clusters are the connected components of every pair known to be a near-duplicate:
the true pairs recall counts (Jaccard >= 0.8, and the edited copies), and every flag of any
system under evaluation that truth confirms (Jaccard >= 0.5), pooled as IR evaluations pool
the results of the systems compared. So two stories a system chains through a wrong flag are
two true clusters, while a chain of real copies is one, however far its ends have drifted
apart. Every other article is alone. A system's clusters come from its decisions.

Two clusterings of the same articles are compared over pairs of articles: pairwise precision
(of the pairs a system puts in one cluster, the share truly in one), pairwise recall (of the
pairs truly in one cluster, the share the system puts in one) and the adjusted Rand index of
Hubert and Arabie (1985): 1 for identical clusterings, about 0 for unrelated ones.

All three come from the contingency table of the two labellings (how many articles each
predicted cluster shares with each true cluster), so a 35,000-article feed costs a pass over
its articles, not one over its 600 million pairs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from consumer.evaluation.feed import TruePair
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.evaluation.truth import MATCH_JACCARD

Labels = Mapping[str, str]  # article id → its cluster's name


@dataclass(frozen=True, slots=True)
class ClusterScores:
    articles: int
    clusters: int  # predicted clusters, singletons included
    predicted_pairs: int  # pairs of articles in one predicted cluster
    true_pairs: int  # pairs of articles in one true cluster
    agreeing_pairs: int  # pairs in one cluster in both
    ari: float

    @property
    def precision(self) -> float | None:
        return self.agreeing_pairs / self.predicted_pairs if self.predicted_pairs else None

    @property
    def recall(self) -> float | None:
        return self.agreeing_pairs / self.true_pairs if self.true_pairs else None


def pooled_pairs(
    pairs: Sequence[TruePair], runs: Iterable[SystemRun], similarity: Callable[[str, str], float]
) -> list[tuple[str, str]]:
    """The true pairs and every flag of these runs that `similarity` confirms (>= 0.5)."""
    pooled = {(p.earlier, p.later) for p in pairs}
    for run in runs:
        for d in run.decisions:
            known = d.matched_id is None or (d.matched_id, d.id) in pooled
            if d.flagged and not known and similarity(d.id, str(d.matched_id)) >= MATCH_JACCARD:
                pooled.add((str(d.matched_id), d.id))
    return sorted(pooled)


def true_clusters(
    article_ids: Iterable[str], pairs: Iterable[TruePair | tuple[str, str]]
) -> dict[str, str]:
    """Each article's true cluster: the connected component of the true pairs it is in, named
    by one of its articles (union-find with path halving)."""
    parent = {a: a for a in article_ids}

    def root(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for pair in pairs:
        first, second = (pair.earlier, pair.later) if isinstance(pair, TruePair) else pair
        earlier, later = root(first), root(second)
        if earlier != later:
            parent[later] = earlier
    return {a: root(a) for a in parent}


def predicted_clusters(decisions: Sequence[SystemAnswer]) -> dict[str, str]:
    """Each article's cluster as a system decided it, in feed order: the `cluster_id` the
    system gave, if it gives one; else a flagged article joins its matched article's cluster
    and an unflagged one starts its own."""
    label: dict[str, str] = {}
    for d in decisions:
        if d.cluster_id is not None:
            label[d.id] = d.cluster_id
        elif d.flagged and d.matched_id is not None:
            label[d.id] = label.get(d.matched_id, d.matched_id)
        else:
            label[d.id] = d.id
    return label


def _pairs_within(sizes: Iterable[int]) -> int:
    return sum(n * (n - 1) // 2 for n in sizes)


def cluster_scores(predicted: Labels, true: Labels) -> ClusterScores:
    """Pair-counting scores of `predicted` against `true`, over the articles of `true`
    (an article a system never decided is a cluster of its own)."""
    both = Counter((predicted.get(a, f"\0{a}"), t) for a, t in true.items())
    predicted_sizes = Counter[str]()
    for (p, _), n in both.items():
        predicted_sizes[p] += n
    agreeing = _pairs_within(both.values())
    predicted_pairs = _pairs_within(predicted_sizes.values())
    true_pairs = _pairs_within(Counter(true.values()).values())
    all_pairs = len(true) * (len(true) - 1) // 2
    return ClusterScores(
        articles=len(true),
        clusters=len(predicted_sizes),
        predicted_pairs=predicted_pairs,
        true_pairs=true_pairs,
        agreeing_pairs=agreeing,
        ari=adjusted_rand(agreeing, predicted_pairs, true_pairs, all_pairs),
    )


def adjusted_rand(agreeing: int, predicted_pairs: int, true_pairs: int, all_pairs: int) -> float:
    """Hubert–Arabie ARI from pair counts: (index − expected) / (maximum − expected), where the
    index is the pairs together in both, its expectation under random labellings with the same
    cluster sizes predicted·true / all, and its maximum the mean of predicted and true."""
    if all_pairs == 0:
        return 1.0  # one article or none: nothing to disagree on
    expected = predicted_pairs * true_pairs / all_pairs
    maximum = (predicted_pairs + true_pairs) / 2
    if maximum == expected:
        # Only when both are all singletons or both one cluster: identical clusterings.
        return 1.0
    return (agreeing - expected) / (maximum - expected)
