"""The MinHash baselines: plain rows take any LSH candidate, verified rows only the best one
whose estimated Jaccard reaches the threshold; datasketch and rensa follow the same rules."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from random import Random

import pytest

from consumer.evaluation import baselines
from consumer.evaluation.feed import FeedArticle
from consumer.records import DecisionKind

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINHASH_ROWS = ("minhash", "minhash-verified", "rensa", "rensa-verified")


class _Sketch:
    def __init__(self, key: int, estimates: dict[frozenset[int], float]) -> None:
        self.key = key
        self._estimates = estimates

    def jaccard(self, other: _Sketch) -> float:
        return self._estimates[frozenset((self.key, other.key))]


class _ScriptedIndex:
    """An LSH index whose candidates and estimates are given, to pin the decision rule."""

    def __init__(self, candidates: dict[int, list[int]], estimates: dict[tuple[int, int], float]):
        self._candidates = candidates
        self._estimates = {frozenset(pair): e for pair, e in estimates.items()}
        self._next = 0

    def sketch(self, grams: Collection[str]) -> _Sketch:
        self._next += 1
        return _Sketch(self._next - 1, self._estimates)

    def candidates(self, sketch: _Sketch) -> list[int]:
        return self._candidates.get(sketch.key, [])

    def insert(self, key: int, sketch: _Sketch) -> None:
        assert key == sketch.key


def _article(n: int, content: str) -> FeedArticle:
    return FeedArticle(f"a{n}", "", content, T0 + timedelta(minutes=n))


def test_plain_takes_the_earliest_candidate_verified_the_best_estimate_above_threshold() -> None:
    articles = [_article(0, "甲乙丙丁戊己"), _article(1, "甲乙丙丁戊己")]
    articles += [_article(2, "庚辛壬癸子丑"), _article(3, "寅卯辰巳午未")]
    candidates = {1: [0], 2: [0], 3: [2, 1, 0]}
    estimates = {(0, 1): 1.0, (0, 2): 0.45, (0, 3): 0.4, (1, 3): 0.7, (2, 3): 0.7}

    def decisions(verified: bool) -> list[tuple[DecisionKind, str | None]]:
        index = _ScriptedIndex(candidates, estimates)
        run = baselines._run_lsh("x", index, articles, verified=verified)
        return [(d.verdict, d.matched_id) for d in run.decisions]

    unique, dup, near = DecisionKind.UNIQUE, DecisionKind.DUPLICATE, DecisionKind.NEAR_DUPLICATE
    # Plain: a2's only candidate is a match at 0.45; a3 matches its earliest candidate, a0.
    assert decisions(verified=False) == [(unique, None), (dup, "a0"), (near, "a0"), (near, "a0")]
    # Verified: a2's candidate is below 0.5; a3's best estimate is a tie, the earlier (a1) wins.
    assert decisions(verified=True) == [(unique, None), (dup, "a0"), (unique, None), (near, "a1")]


def _sentence(rng: Random) -> str:
    return "".join(chr(rng.randrange(0x4E00, 0x4E00 + 3000)) for _ in range(20))


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, str]]:
    """Each MinHash row's flags (id → matched id) on 30 articles, 30 copies sharing half their
    sentences with them (Jaccard 0.33: LSH makes some of them candidates) and 5 near-exact
    copies (one character dropped)."""
    rng = Random(7)
    bodies = ["。".join(_sentence(rng) for _ in range(10)) + "。" for _ in range(30)]
    articles = [_article(i, body) for i, body in enumerate(bodies)]
    for i, body in enumerate(bodies):
        kept = body.split("。")[:5] + [_sentence(rng) for _ in range(5)]
        articles.append(
            FeedArticle(f"half{i}", "", "。".join(kept) + "。", T0 + timedelta(hours=1))
        )
    for i in range(5):
        articles.append(FeedArticle(f"copy{i}", "", bodies[i][1:], T0 + timedelta(hours=2)))
    flags = {}
    for name in MINHASH_ROWS:
        run = baselines.BASELINES[name](articles)
        assert run.system == name and len(run.decisions) == len(articles)
        assert run.cpu_seconds is not None and run.cpu_seconds > 0
        flags[name] = {d.id: d.matched_id for d in run.decisions if d.flagged}
    return flags


@pytest.mark.parametrize("name", MINHASH_ROWS)
def test_every_row_finds_the_near_exact_copies(runs: dict[str, dict[str, str]], name: str) -> None:
    assert all(runs[name][f"copy{i}"] == f"a{i}" for i in range(5))


@pytest.mark.parametrize("library", ["minhash", "rensa"])
def test_plain_accepts_candidates_that_verification_rejects(
    runs: dict[str, dict[str, str]], library: str
) -> None:
    plain, verified = runs[library], runs[f"{library}-verified"]
    halves = {k: v for k, v in plain.items() if k.startswith("half")}
    assert halves, "no half copy became an LSH candidate: the test lost its point"
    assert all(matched == f"a{k.removeprefix('half')}" for k, matched in halves.items())
    assert not any(k.startswith("half") for k in verified)
    # Every verified match is an LSH candidate, which the plain row takes too.
    assert set(verified) <= set(plain)
