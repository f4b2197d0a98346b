"""Precision, recall and F1 on a hand-made decision set, against hand-computed numbers."""

from __future__ import annotations

import pytest

from consumer.evaluation.feed import TruePair
from consumer.evaluation.metrics import score
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.records import DecisionKind

# Jaccard of the pairs the decisions below match; any other pair is unrelated.
JACCARD = {("a", "b"): 0.9, ("a", "c"): 0.3, ("b", "d"): 0.6}


def similarity(x: str, y: str) -> float:
    return JACCARD.get((x, y), JACCARD.get((y, x), 0.0))


DECISIONS = (
    SystemAnswer("a", DecisionKind.UNIQUE),
    SystemAnswer("b", DecisionKind.NEAR_DUPLICATE, "a"),  # right: 0.9
    SystemAnswer("c", DecisionKind.DUPLICATE, "a"),  # wrong: 0.3 < 0.5
    SystemAnswer("d", DecisionKind.NEAR_DUPLICATE, "b"),  # right: 0.6, though its pair names `a`
    SystemAnswer("e", DecisionKind.UNIQUE),
)
PAIRS = [
    TruePair("a", "b", "corpus", 0.9),  # found
    TruePair("a", "d", "typos", 0.85),  # found through b: any match with Jaccard ≥ 0.5 counts
    TruePair("b", "e", "typos", 0.8),  # missed: e decided unique
    TruePair("a", "c", "html", 0.95),  # missed: c matched with a Jaccard below 0.5
]


def test_hand_computed_scores() -> None:
    s = score(SystemRun("x", DECISIONS, seconds=2.0), PAIRS, similarity)
    assert (s.flagged, s.correct) == (3, 2)
    assert s.precision == pytest.approx(2 / 3)
    assert (s.pairs, s.found) == (4, 2)
    assert s.recall == pytest.approx(0.5)
    assert s.f1 == pytest.approx(4 / 7)  # 2·(2/3)·(1/2) / (2/3 + 1/2)
    assert s.articles_per_second == pytest.approx(2.5)
    assert {k: (v.pairs, v.found) for k, v in s.by_kind.items()} == {
        "corpus": (1, 1),
        "html": (1, 0),
        "typos": (2, 1),
    }
    assert s.by_kind["typos"].recall == pytest.approx(0.5)


def test_speed_per_cpu_second_only_where_cpu_time_was_measured() -> None:
    s = score(SystemRun("x", DECISIONS, seconds=2.0, cpu_seconds=4.0), PAIRS, similarity)
    assert s.articles_per_cpu_second == pytest.approx(1.25)
    assert score(SystemRun("x", DECISIONS, 2.0), PAIRS, similarity).articles_per_cpu_second is None


def test_nothing_flagged_has_no_precision() -> None:
    quiet = tuple(SystemAnswer(d.id, DecisionKind.UNIQUE) for d in DECISIONS)
    s = score(SystemRun("x", quiet, seconds=1.0), PAIRS, similarity)
    assert s.precision is None
    assert s.recall == 0.0
    assert s.f1 is None


def test_failed_run_has_no_numbers() -> None:
    s = score(SystemRun("newsdedup", (), 1.0, error="check exited 2"), PAIRS, similarity)
    assert s.error == "check exited 2"
    assert (s.precision, s.recall, s.f1, s.articles_per_second) == (None, None, None, None)
