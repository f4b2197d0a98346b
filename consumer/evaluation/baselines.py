"""The baselines newsdedup must beat (issue 6), run in-process on the same feed.

All decide in the service's streaming order: each article is queried against the articles
before it, then inserted. None has a time window: they remember the whole feed.

The MinHash baselines come in two libraries and two ways of using their LSH index, four rows
in all, every one over the same character 5-grams of the normalized text (shingled in Python,
as both libraries' documentation shows), 128 permutations, threshold 0.5:

* `minhash`: datasketch MinHashLSH, plain: any LSH candidate is a match (the earliest one).
  This is what README and BENCHMARKS describe as MinHashLSH "accepting every LSH candidate".
* `minhash-verified`: datasketch MinHashLSH, the best candidate by estimated Jaccard is the
  match, and only if that estimate is ≥ 0.5. Until the four rows existed this was the row
  named `minhash`: the "MinHashLSH" figures in benchmarks/history/ taken before then are this one's.
* `rensa`, `rensa-verified`: the same two rules over rensa's RMinHash and RMinHashLSH (Rust),
  32 bands of 4 rows.

Identical normalized texts are `duplicate`, other matches `near_duplicate`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from consumer.evaluation import truth
from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.ops.progress import Progress
from consumer.records import DecisionKind

MINHASH_PERMUTATIONS = 128
MINHASH_SHINGLE = 5
MINHASH_THRESHOLD = 0.5
RENSA_BANDS = 32  # × 4 rows = 128 permutations
RENSA_SEED = 42  # the seed rensa's own examples use
SIMHASH_K = 3


def _char_shingles(normalized: str, width: int) -> set[str]:
    if len(normalized) <= width:
        return {normalized} if normalized else set()
    return {normalized[i : i + width] for i in range(len(normalized) - width + 1)}


class _LshIndex(Protocol):
    """One MinHash library's sketches and LSH index; keys are feed positions."""

    def sketch(self, grams: Collection[str]) -> Any: ...
    def candidates(self, sketch: Any) -> Collection[int]: ...
    def insert(self, key: int, sketch: Any) -> None: ...


class _Datasketch:
    def __init__(self) -> None:
        from datasketch import MinHash, MinHashLSH

        self._minhash = MinHash
        self._template = MinHash(num_perm=MINHASH_PERMUTATIONS)
        self._lsh = MinHashLSH(threshold=MINHASH_THRESHOLD, num_perm=MINHASH_PERMUTATIONS)

    def sketch(self, grams: Collection[str]) -> Any:
        # Sharing the template's permutations avoids regenerating them per article.
        sketch = self._minhash(
            num_perm=MINHASH_PERMUTATIONS,
            permutations=self._template.permutations,
            scheme=self._template.scheme,
        )
        sketch.update_batch([g.encode("utf-8") for g in grams])
        return sketch

    def candidates(self, sketch: Any) -> Collection[int]:
        return self._lsh.query(sketch)

    def insert(self, key: int, sketch: Any) -> None:
        self._lsh.insert(key, sketch)


class _Rensa:
    def __init__(self) -> None:
        from rensa import RMinHash, RMinHashLSH

        self._rminhash = RMinHash
        self._lsh = RMinHashLSH(MINHASH_THRESHOLD, MINHASH_PERMUTATIONS, RENSA_BANDS)

    def sketch(self, grams: Collection[str]) -> Any:
        sketch = self._rminhash(MINHASH_PERMUTATIONS, RENSA_SEED)
        sketch.update(list(grams))
        return sketch

    def candidates(self, sketch: Any) -> Collection[int]:
        return self._lsh.query(sketch)

    def insert(self, key: int, sketch: Any) -> None:
        self._lsh.insert(key, sketch)


def _run_lsh(
    system: str, index: _LshIndex, articles: Sequence[FeedArticle], verified: bool
) -> SystemRun:
    """Plain: the earliest LSH candidate is the match. Verified: the candidate with the highest
    estimated Jaccard, the earliest on ties, and only if the estimate is ≥ the threshold."""
    sketches: list[Any] = []  # by feed position; None for an article with no text
    normalized_of: list[str] = []
    decisions = []
    started, cpu_started = time.perf_counter(), time.process_time()
    with Progress(system, total=len(articles), unit="articles") as progress:
        for i, article in enumerate(articles):
            normalized = truth.normalize(article.text)
            grams = _char_shingles(normalized, MINHASH_SHINGLE)
            sketch = index.sketch(grams) if grams else None
            match: int | None = None
            if sketch is not None:
                candidates = index.candidates(sketch)
                if verified:
                    match = _best_verified(sketch, candidates, sketches)
                else:
                    match = min(candidates, default=None)
                index.insert(i, sketch)
            if match is None:
                decisions.append(SystemAnswer(article.id, DecisionKind.UNIQUE))
            else:
                same = normalized_of[match] == normalized
                verdict = DecisionKind.DUPLICATE if same else DecisionKind.NEAR_DUPLICATE
                decisions.append(SystemAnswer(article.id, verdict, articles[match].id))
            sketches.append(sketch)
            normalized_of.append(normalized)
            progress.advance()
    return SystemRun(
        system,
        tuple(decisions),
        time.perf_counter() - started,
        cpu_seconds=time.process_time() - cpu_started,
    )


def _best_verified(sketch: Any, candidates: Collection[int], sketches: list[Any]) -> int | None:
    best: tuple[float, int] | None = None
    for key in candidates:
        estimate = sketch.jaccard(sketches[key])
        if estimate >= MINHASH_THRESHOLD:
            candidate = (-estimate, key)
            best = candidate if best is None or candidate < best else best
    return None if best is None else best[1]


def run_minhash(articles: Sequence[FeedArticle]) -> SystemRun:
    """datasketch MinHashLSH, plain: any LSH candidate is the match (the earliest)."""
    return _run_lsh("minhash", _Datasketch(), articles, verified=False)


def run_minhash_verified(articles: Sequence[FeedArticle]) -> SystemRun:
    """datasketch MinHashLSH, the best candidate kept if its estimated Jaccard is ≥ 0.5."""
    return _run_lsh("minhash-verified", _Datasketch(), articles, verified=True)


def run_rensa(articles: Sequence[FeedArticle]) -> SystemRun:
    """rensa RMinHashLSH (32 bands × 4), plain: any LSH candidate is the match (the earliest)."""
    return _run_lsh("rensa", _Rensa(), articles, verified=False)


def run_rensa_verified(articles: Sequence[FeedArticle]) -> SystemRun:
    """rensa RMinHashLSH (32 bands × 4), the best candidate kept if its estimate is ≥ 0.5."""
    return _run_lsh("rensa-verified", _Rensa(), articles, verified=True)


def run_simhash(articles: Sequence[FeedArticle]) -> SystemRun:
    """The `simhash` package: SimhashIndex over its own character 4-gram features, k = 3.

    The match is the candidate at the smallest Hamming distance, the earliest on ties.
    """
    from simhash import Simhash, SimhashIndex

    quiet = logging.getLogger("simhash-eval")
    quiet.setLevel(logging.ERROR)  # it warns on every large bucket, which formulaic news has
    index = SimhashIndex([], f=64, k=SIMHASH_K, log=quiet)
    hashes: dict[str, Simhash] = {}
    position: dict[str, int] = {}
    normalized_of: dict[str, str] = {}
    decisions = []
    started, cpu_started = time.perf_counter(), time.process_time()
    with Progress("simhash", total=len(articles), unit="articles") as progress:
        for i, article in enumerate(articles):
            normalized = truth.normalize(article.text)
            if not normalized:
                decisions.append(SystemAnswer(article.id, DecisionKind.UNIQUE))
                progress.advance()
                continue
            # Given a string, Simhash cuts its own character 4-grams (width=4), as documented.
            fingerprint = Simhash(normalized, f=64)
            near = index.get_near_dups(fingerprint)
            if near:
                key = min(near, key=lambda k: (fingerprint.distance(hashes[k]), position[k]))
                same = normalized_of[key] == normalized
                verdict = DecisionKind.DUPLICATE if same else DecisionKind.NEAR_DUPLICATE
                decisions.append(SystemAnswer(article.id, verdict, key))
            else:
                decisions.append(SystemAnswer(article.id, DecisionKind.UNIQUE))
            index.add(article.id, fingerprint)
            hashes[article.id] = fingerprint
            position[article.id] = i
            normalized_of[article.id] = normalized
            progress.advance()
    return SystemRun(
        "simhash",
        tuple(decisions),
        time.perf_counter() - started,
        cpu_seconds=time.process_time() - cpu_started,
    )


BASELINES: dict[str, Callable[[Sequence[FeedArticle]], SystemRun]] = {
    "minhash": run_minhash,
    "minhash-verified": run_minhash_verified,
    "rensa": run_rensa,
    "rensa-verified": run_rensa_verified,
    "simhash": run_simhash,
}
