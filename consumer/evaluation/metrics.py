"""Precision, recall and F1 exactly as issue 6 defines them, recall per kind of pair.

* Precision: articles decided `duplicate`/`near_duplicate` whose matched article has Jaccard
  ≥ 0.5 with them, over all articles so decided.
* Recall: true pairs (earlier, later) whose later article is decided a duplicate of *some*
  article with Jaccard ≥ 0.5 to it (not necessarily `earlier`: matching an equally good copy
  is right), over all true pairs.
* Cluster quality, where the true clusters are given: pairwise precision and recall over
  clusters and the adjusted Rand index (consumer/evaluation/clusters.py).
* Template flags, on a feed with page templates: wrong flags between two articles that both
  carry a template (their stories' Jaccard < 0.5), the mistakes a shared template invites.

Jaccard is that of the stories: on a templated feed, `similarity` compares untemplated texts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from consumer.evaluation.clusters import ClusterScores, Labels, cluster_scores, predicted_clusters
from consumer.evaluation.feed import TruePair
from consumer.evaluation.runs import SystemRun
from consumer.evaluation.truth import MATCH_JACCARD

Similarity = Callable[[str, str], float]


@dataclass(frozen=True, slots=True)
class KindRecall:
    pairs: int
    found: int

    @property
    def recall(self) -> float | None:
        return self.found / self.pairs if self.pairs else None


@dataclass(frozen=True, slots=True)
class Scores:
    system: str
    articles: int
    seconds: float
    flagged: int  # decided duplicate or near_duplicate
    correct: int  # … with a matched article of Jaccard ≥ 0.5
    pairs: int
    found: int
    by_kind: dict[str, KindRecall]
    error: str | None = None
    cpu_seconds: float | None = None
    template_flags: int | None = None  # None: the feed has no page templates
    clusters: ClusterScores | None = None  # None: not measured, or the run failed

    @property
    def precision(self) -> float | None:
        # No flagged article: precision is undefined, not perfect; reports show "n/a".
        return self.correct / self.flagged if self.flagged and not self.error else None

    @property
    def recall(self) -> float | None:
        return self.found / self.pairs if self.pairs and not self.error else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None or p + r == 0:
            return None
        return 2 * p * r / (p + r)

    @property
    def articles_per_second(self) -> float | None:
        return self.articles / self.seconds if self.seconds > 0 and not self.error else None

    @property
    def articles_per_cpu_second(self) -> float | None:
        """Articles per second of CPU used (all its processes): what a core buys, however busy
        the machine; None where CPU time is unknown."""
        cpu = self.cpu_seconds
        return self.articles / cpu if cpu and cpu > 0 and not self.error else None


def score(
    run: SystemRun,
    pairs: Sequence[TruePair],
    similarity: Similarity,
    templated: Collection[str] | None = None,
    true_clusters: Labels | None = None,
) -> Scores:
    """Scores of one system's run against the true pairs, judged by `similarity` (Jaccard);
    `templated`, on a feed with page templates, names the articles that carry one;
    `true_clusters` (article → true cluster, every article) adds cluster quality."""
    if run.error is not None:
        return Scores(run.system, 0, run.seconds, 0, 0, len(pairs), 0, {}, run.error)
    good: dict[str, bool] = {}  # article id → flagged with a correct match
    flagged = 0
    template_flags = 0
    for d in run.decisions:
        if d.flagged:
            flagged += 1
            good[d.id] = (
                d.matched_id is not None and similarity(d.id, d.matched_id) >= MATCH_JACCARD
            )
            if templated is not None and not good[d.id]:
                template_flags += d.id in templated and d.matched_id in templated
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for pair in pairs:
        t = totals[pair.kind]
        t[0] += 1
        t[1] += good.get(pair.later, False)
    by_kind = {kind: KindRecall(n, f) for kind, (n, f) in sorted(totals.items())}
    return Scores(
        system=run.system,
        articles=len(run.decisions),
        seconds=run.seconds,
        flagged=flagged,
        correct=sum(good.values()),
        pairs=len(pairs),
        found=sum(k.found for k in by_kind.values()),
        by_kind=by_kind,
        cpu_seconds=run.cpu_seconds,
        template_flags=None if templated is None else template_flags,
        clusters=(
            None
            if true_clusters is None
            else cluster_scores(predicted_clusters(run.decisions), true_clusters)
        ),
    )
