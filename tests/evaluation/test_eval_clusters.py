"""Cluster quality (consumer/evaluation/clusters.py): the contingency-count scores agree with
a brute-force count over every pair of articles, and with values computed by hand."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.evaluation.clusters import (
    cluster_scores,
    pooled_pairs,
    predicted_clusters,
    true_clusters,
)
from consumer.evaluation.feed import TruePair
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.records import DecisionKind


def _brute_force(predicted: dict[str, str], true: dict[str, str]) -> tuple[int, int, int, float]:
    """Pairs together in predicted, in true, in both, and the ARI in its Rand-table form,
    2(ad − bc) / ((a + b)(b + d) + (a + c)(c + d)), counted over every pair of articles."""
    a = b = c = d = 0  # together in both / only predicted / only true / in neither
    for x, y in combinations(true, 2):
        p, t = predicted[x] == predicted[y], true[x] == true[y]
        a += p and t
        b += p and not t
        c += t and not p
        d += not p and not t
    denominator = (a + b) * (b + d) + (a + c) * (c + d)
    ari = 1.0 if denominator == 0 else 2 * (a * d - b * c) / denominator
    return a + b, a + c, a, ari


labellings = st.integers(min_value=0, max_value=40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 6), min_size=n, max_size=n),
        st.lists(st.integers(0, 6), min_size=n, max_size=n),
    )
)


@given(labellings)
def test_contingency_counts_agree_with_every_pair_counted(labels) -> None:
    predicted_labels, true_labels = labels
    predicted = {f"a{i}": f"p{x}" for i, x in enumerate(predicted_labels)}
    true = {f"a{i}": f"t{x}" for i, x in enumerate(true_labels)}
    scores = cluster_scores(predicted, true)
    predicted_pairs, true_pairs, agreeing, ari = _brute_force(predicted, true)
    assert (scores.predicted_pairs, scores.true_pairs) == (predicted_pairs, true_pairs)
    assert scores.agreeing_pairs == agreeing
    assert scores.ari == pytest.approx(ari, abs=1e-9)
    assert scores.precision == (agreeing / predicted_pairs if predicted_pairs else None)
    assert scores.recall == (agreeing / true_pairs if true_pairs else None)


def test_a_hand_computed_example() -> None:
    # True stories {a b c} {d e} {f}; a system found {a b} {c d e} {f}.
    true = dict(zip("abcdef", "XXXYYZ", strict=True))
    predicted = dict(zip("abcdef", "PPQQQR", strict=True))
    s = cluster_scores(predicted, true)
    # Together in truth: ab ac bc de = 4. Predicted: ab cd ce de = 4. Both: ab de = 2.
    assert (s.true_pairs, s.predicted_pairs, s.agreeing_pairs) == (4, 4, 2)
    assert (s.precision, s.recall) == (0.5, 0.5)
    # 15 pairs in all: expected index 4·4/15 = 16/15, maximum (4 + 4)/2 = 4,
    # ARI = (2 − 16/15) / (4 − 16/15) = (14/15) / (44/15) = 7/22.
    assert s.ari == pytest.approx(7 / 22)
    assert s.clusters == 3


def test_identical_clusterings_score_one_and_trivial_ones_too() -> None:
    true = dict(zip("abcde", "XXYYZ", strict=True))
    assert cluster_scores(true, true).ari == 1.0
    singletons = {a: a for a in "abcde"}
    assert cluster_scores(singletons, singletons).ari == 1.0  # nothing together on either side
    assert cluster_scores({}, {}).ari == 1.0


def test_true_clusters_are_the_connected_components_of_the_true_pairs() -> None:
    pairs = [TruePair("a", "b", "corpus", 0.9), TruePair("b", "c", "typos", 0.9)]
    pairs.append(TruePair("d", "e", "html", 0.95))
    labels = true_clusters("abcdef", pairs)
    assert labels["a"] == labels["b"] == labels["c"]
    assert labels["d"] == labels["e"] != labels["a"]
    assert labels["f"] not in (labels["a"], labels["d"])


def test_a_system_without_cluster_ids_clusters_through_its_matches() -> None:
    near, unique = DecisionKind.NEAR_DUPLICATE, DecisionKind.UNIQUE
    decisions = [
        SystemAnswer("a", unique),
        SystemAnswer("b", near, "a"),
        SystemAnswer("c", near, "b"),  # joins a's cluster through b
        SystemAnswer("d", unique),
    ]
    assert predicted_clusters(decisions) == {"a": "a", "b": "a", "c": "a", "d": "d"}
    # A system naming its clusters is taken at its word.
    named = [SystemAnswer("a", unique, None, "k1"), SystemAnswer("b", near, "a", "k2")]
    assert predicted_clusters(named) == {"a": "k1", "b": "k2"}


def test_flags_truth_confirms_join_true_clusters_and_a_wrong_one_does_not() -> None:
    """A chain of real copies (b and c, each of the one before) is one story however far its
    ends drift apart; a wrong flag (x, unrelated, matched to c) chains two stories into one
    cluster, which the pooled truth keeps apart."""
    similar = {("b", "a"), ("c", "b")}

    def similarity(x: str, y: str) -> float:
        return 0.7 if (x, y) in similar or (y, x) in similar else 0.1

    run = SystemRun(
        "system",
        (
            SystemAnswer("a", DecisionKind.UNIQUE),
            SystemAnswer("b", DecisionKind.NEAR_DUPLICATE, "a", "a"),
            SystemAnswer("c", DecisionKind.NEAR_DUPLICATE, "b", "a"),
            SystemAnswer("x", DecisionKind.NEAR_DUPLICATE, "c", "a"),
        ),
        1.0,
        None,
    )
    pooled = pooled_pairs([TruePair("a", "b", "edit", 0.7)], [run], similarity)
    assert pooled == [("a", "b"), ("b", "c")]
    true = true_clusters("abcx", pooled)
    assert true["a"] == true["b"] == true["c"] != true["x"]
    scores = cluster_scores(predicted_clusters(run.decisions), true)
    assert (scores.predicted_pairs, scores.agreeing_pairs) == (6, 3)
