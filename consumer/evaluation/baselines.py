"""The baselines newsdedup must beat (issue 6), run in-process on the same feed.

Both decide in the service's streaming order: each article is queried against the articles
before it, then inserted. Neither has a time window: they remember the whole feed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from consumer.cli.progress import Progress
from consumer.deciding.decision import DecisionKind
from consumer.evaluation import truth
from consumer.evaluation.feed import Article
from consumer.evaluation.runs import Decision, Run

MINHASH_PERMUTATIONS = 128
MINHASH_SHINGLE = 5
MINHASH_THRESHOLD = 0.5
SIMHASH_K = 3


def _char_shingles(normalized: str, width: int) -> set[str]:
    if len(normalized) <= width:
        return {normalized} if normalized else set()
    return {normalized[i : i + width] for i in range(len(normalized) - width + 1)}


def run_minhash(articles: Sequence[Article]) -> Run:
    """datasketch MinHashLSH: 128 permutations, character 5-grams, threshold 0.5.

    LSH candidates are verified by their estimated Jaccard (≥ the threshold, as a user of
    MinHashLSH would) and the best one is the match, the earliest on ties. Identical
    normalized texts are `duplicate`.
    """
    from datasketch import MinHash, MinHashLSH

    template = MinHash(num_perm=MINHASH_PERMUTATIONS)
    lsh = MinHashLSH(threshold=MINHASH_THRESHOLD, num_perm=MINHASH_PERMUTATIONS)
    sketches: dict[str, MinHash] = {}
    normalized_of: dict[str, str] = {}
    position: dict[str, int] = {}
    decisions = []
    started = time.perf_counter()
    with Progress("minhash", total=len(articles), unit="articles") as progress:
        for i, article in enumerate(articles):
            normalized = truth.normalize(article.text)
            grams = _char_shingles(normalized, MINHASH_SHINGLE)
            if not grams:
                decisions.append(Decision(article.id, DecisionKind.UNIQUE))
                progress.advance()
                continue
            # Sharing the template's permutations avoids regenerating them per article.
            sketch = MinHash(
                num_perm=MINHASH_PERMUTATIONS,
                permutations=template.permutations,
                scheme=template.scheme,
            )
            sketch.update_batch([g.encode("utf-8") for g in grams])
            best: tuple[float, int, str] | None = None
            for key in lsh.query(sketch):
                estimate = sketch.jaccard(sketches[key])
                if estimate >= MINHASH_THRESHOLD:
                    candidate = (-estimate, position[key], key)
                    best = candidate if best is None or candidate < best else best
            if best is None:
                decisions.append(Decision(article.id, DecisionKind.UNIQUE))
            else:
                same = normalized_of[best[2]] == normalized
                verdict = DecisionKind.DUPLICATE if same else DecisionKind.NEAR_DUPLICATE
                decisions.append(Decision(article.id, verdict, best[2]))
            lsh.insert(article.id, sketch)
            sketches[article.id] = sketch
            normalized_of[article.id] = normalized
            position[article.id] = i
            progress.advance()
    return Run("minhash", tuple(decisions), time.perf_counter() - started)


def run_simhash(articles: Sequence[Article]) -> Run:
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
    started = time.perf_counter()
    with Progress("simhash", total=len(articles), unit="articles") as progress:
        for i, article in enumerate(articles):
            normalized = truth.normalize(article.text)
            if not normalized:
                decisions.append(Decision(article.id, DecisionKind.UNIQUE))
                progress.advance()
                continue
            # Given a string, Simhash cuts its own character 4-grams (width=4), as documented.
            fingerprint = Simhash(normalized, f=64)
            near = index.get_near_dups(fingerprint)
            if near:
                key = min(near, key=lambda k: (fingerprint.distance(hashes[k]), position[k]))
                same = normalized_of[key] == normalized
                verdict = DecisionKind.DUPLICATE if same else DecisionKind.NEAR_DUPLICATE
                decisions.append(Decision(article.id, verdict, key))
            else:
                decisions.append(Decision(article.id, DecisionKind.UNIQUE))
            index.add(article.id, fingerprint)
            hashes[article.id] = fingerprint
            position[article.id] = i
            normalized_of[article.id] = normalized
            progress.advance()
    return Run("simhash", tuple(decisions), time.perf_counter() - started)


BASELINES: dict[str, Callable[[Sequence[Article]], Run]] = {
    "minhash": run_minhash,
    "simhash": run_simhash,
}
