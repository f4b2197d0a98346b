"""Article fingerprints: a 64-bit SimHash of TF-IDF-weighted terms and an exact content hash.

Pure: text in, fingerprint out. Built once per process (`Fingerprinter`), then called per article
or, faster, per batch of articles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, pairwise

import mmh3
import numpy as np

from consumer.config import check_fingerprint_options
from consumer.errors import ConfigError, InputError, NewsdedupError
from consumer.fingerprint.idf import load_idf
from consumer.fingerprint.kernel import Kernel, load_kernel
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.shingles import bands_and_shingles
from consumer.fingerprint.sketch import (
    bin_minima,
    packed_minima,
    shingle_hashes,
    verification_data,
)
from consumer.fingerprint.terms import TermExtractor, hash_terms
from indexstore.value import value_type

# Weights are rounded to multiples of 2**-16 before the vote so that the vote is an exact integer
# sum: a float sum's rounding depends on the order of addition (and on the BLAS build), which
# could flip a bit whose vote is near zero between machines. The largest possible sum
# (100k chars × idf ≈ 20 × 2**16) stays far below 2**63.
_WEIGHT_SCALE = float(1 << 16)

# Articles per batch in `fingerprint_many`: large enough that per-call costs vanish, small enough
# that the batch's arrays (the vote's bit matrix: 64 bytes per term) stay a few megabytes.
# 256 to 1,024 measured alike on hkcnews, and 16 to 3,072 with the native kernel.
BATCH = 256


@dataclass(frozen=True, slots=True)
class FingerprintOptions:
    """What shapes a fingerprint; the `[fingerprint]` config section. Changing any option
    changes fingerprints, so an index must be rebuilt after a change."""

    engine: str = "rjieba"
    idf_path: str | None = None
    # Title terms count as much as body terms (1.0). Measured on real pairs
    # (benchmarks/history/undated.md, "Title weight"): more title weight moved true
    # near-duplicates apart (re-titled reposts) and pulled same-headline different-story
    # items (wire series, "快讯") together.
    title_weight: float = 1.0
    # All terms: at k = 12 they keep 99.4 % of true pairs within k on hkcnews, top-64 98.0 %
    # (BENCHMARKS.md, "Accuracy"); verification, not a term cut, keeps boilerplate out.
    max_terms: int | None = None
    max_chars: int = 100_000
    convert_traditional: bool = True

    def __post_init__(self) -> None:
        # None is all terms here; 0 would keep none, which the configuration's 0 never means.
        if self.max_terms == 0:
            raise ConfigError("option [fingerprint] max_terms must be 1 or more (or unset: all)")
        check_fingerprint_options(self.engine, self.title_weight, self.max_terms, self.max_chars)


@value_type
class Fingerprint:
    simhash: int  # unsigned, 0 <= simhash < 2**64
    content_hash: bytes  # mmh3 x64 128-bit of normalized title + "\n" + normalized content
    # Verifies SimHash candidates: the sketch of the same normalized text, then a short text's
    # letters key or a mixed-script text's character sketch (consumer/fingerprint/sketch.py,
    # `verification_data`).
    sketch: bytes = b""
    # The LSH band keys and the bottom-512 shingles record of the text's primary shingling
    # (consumer/fingerprint/shingles.py); b"" for a text without shingles.
    bands: bytes = b""
    shingles: bytes = b""
    text_chars: int = 0  # length of the normalized title + "\n" + content
    terms: tuple[tuple[str, float], ...] = ()  # only with explain=True: heaviest first

    @property
    def simhash_hex(self) -> str:
        return f"{self.simhash:016x}"

    @property
    def content_hash_hex(self) -> str:
        return self.content_hash.hex()


class EmptyTextError(NewsdedupError):
    """Nothing left to fingerprint: no term survives normalization and filtering."""


_NOTHING_TO_FINGERPRINT = (
    "nothing to fingerprint: after normalization the title and content hold no word "
    "of two or more characters that is not a stop word"
)


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    return (a ^ b).bit_count()


class Fingerprinter:
    """Normalizes, extracts terms, weights them by TF-IDF and votes a SimHash.

    Construction loads the IDF table (~0.3 s, once per process and path) and the segmenter.
    `fingerprint_many` runs each stage over a whole batch, which is faster than article by
    article: each stage's tables (OpenCC's, the segmenter's dictionary, the IDF table) stay in
    the CPU cache while it runs (OpenCC alone costs about twice as much per article when stages
    alternate), and the NumPy steps run once per batch.

    With the fast engine, everything after normalization (terms, weights, top N, vote, content
    hash, sketch, band keys, shingles record) runs in the native kernel (`consumer/native/`)
    unless `native=False` (`_native_batch`); the Python code (`_reference_batch`) is the
    reference it must equal, and it still serves `explain`, whose term lists the kernel does
    not return.
    """

    __slots__ = ("_idf", "_kernel", "_normalize", "_terms", "options")

    def __init__(
        self, options: FingerprintOptions = FingerprintOptions(), *, native: bool = True
    ) -> None:
        self.options = options
        self._normalize = Normalizer(options.convert_traditional)
        self._idf = load_idf(options.idf_path)
        self._kernel = (
            load_kernel(options.idf_path) if native and options.engine == "rjieba" else None
        )
        # The native kernel segments by itself: with it, the Python segmenter (rjieba's import
        # alone is ~0.08 s of every worker's start) waits for the first `explain`.
        self._terms = TermExtractor(options.engine) if self._kernel is None else None

    def fingerprint(self, title: str, content: str, *, explain: bool = False) -> Fingerprint:
        """One article; raises `EmptyTextError` or `InputError` when it has no fingerprint."""
        result = self._fingerprint_batch([(title, content)], explain)[0]
        if isinstance(result, NewsdedupError):
            raise result
        return result

    def fingerprint_many(
        self, items: Sequence[tuple[str, str]]
    ) -> list[Fingerprint | NewsdedupError]:
        """(title, content) pairs to fingerprints, with the same results as `fingerprint`; an
        article that cannot be fingerprinted gets its error in its place, not raised."""
        results: list[Fingerprint | NewsdedupError] = []
        for start in range(0, len(items), BATCH):
            results += self._fingerprint_batch(items[start : start + BATCH], False)
        return results

    def _fingerprint_batch(
        self, items: Sequence[tuple[str, str]], explain: bool
    ) -> list[Fingerprint | NewsdedupError]:
        """Normalize the batch, then fingerprint it on the native path or on the reference
        path; an article left without a result had no term (`EmptyTextError`)."""
        results: list[Fingerprint | NewsdedupError | None] = [None] * len(items)
        limit = self.options.max_chars
        texts: list[str] = []
        valid: list[int] = []
        for i, (title, content) in enumerate(items):
            if isinstance(title, str) and isinstance(content, str):
                texts += (title[:limit], content[:limit])
                valid.append(i)
            else:
                results[i] = InputError("title and content must be strings")
        normalized = self._normalize.many(texts)
        titles, contents = normalized[0::2], normalized[1::2]
        if self._kernel is not None and not explain:
            self._native_batch(self._kernel, valid, titles, contents, results)
        else:
            self._reference_batch(valid, titles, contents, results, explain)
        return _with_empty_text_errors(results)

    def _native_batch(
        self,
        kernel: Kernel,
        valid: list[int],
        titles: list[str],
        contents: list[str],
        results: list[Fingerprint | NewsdedupError | None],
    ) -> None:
        """Everything after normalization in the native kernel, one call per batch: into
        `results[valid[k]]` the fingerprint of the k-th normalized title and content."""
        computed = kernel.fingerprint_many(
            titles, contents, self.options.title_weight, self.options.max_terms or 0
        )
        for i, title, content, fingerprint in zip(valid, titles, contents, computed, strict=True):
            if fingerprint is not None:
                simhash, content_hash, article_sketch, bands, shingles, length = fingerprint
                data = verification_data(article_sketch, f"{title}\n{content}")
                results[i] = Fingerprint(
                    simhash, content_hash, data, bands, shingles, text_chars=length
                )

    def _reference_batch(
        self,
        valid: list[int],
        titles: list[str],
        contents: list[str],
        results: list[Fingerprint | NewsdedupError | None],
        explain: bool,
    ) -> None:
        """The pure-Python path, which the native kernel must equal, and the only one that
        explains (lists each fingerprint's terms): into `results[valid[k]]` the fingerprint of
        the k-th normalized title and content."""
        if self._terms is None:
            self._terms = TermExtractor(self.options.engine)
        docs: list[int] = []  # items with at least one term
        counts: list[Counter[str]] = []
        content_hashes: list[bytes] = []
        sketches: list[bytes] = []
        extras: list[tuple[bytes, bytes]] = []  # band keys and shingles record
        lengths: list[int] = []
        for i, title, content in zip(valid, titles, contents, strict=True):
            c = self._term_counts(self._terms, title, content)
            if c:
                docs.append(i)
                counts.append(c)
                text = f"{title}\n{content}"
                content_hashes.append(mmh3.hash_bytes(text.encode(), seed=0, x64arch=True))
                kind, hashes = shingle_hashes(text)
                minima = bin_minima(hashes)
                sketches.append(verification_data(packed_minima(kind, minima), text))
                extras.append(bands_and_shingles(kind, hashes, minima))
                lengths.append(len(text))
        if not docs:
            return

        # All terms of the batch in flat arrays, article after article.
        sizes = list(map(len, counts))
        terms = list(chain.from_iterable(counts))
        tf = np.fromiter(chain.from_iterable(c.values() for c in counts), np.float64, len(terms))
        hashes = hash_terms(terms)
        weights = tf * self._idf.lookup(hashes)
        term_bounds = [0, *accumulate(sizes)]

        keep = np.arange(len(terms))
        max_terms = self.options.max_terms
        if max_terms is not None and max(sizes) > max_terms:
            keep = _heaviest(weights, hashes, sizes, max_terms)
            sizes = [min(n, max_terms) for n in sizes]
        bounds = [0, *accumulate(sizes)]
        simhashes = _vote(weights[keep], hashes[keep], bounds)

        for j, (i, simhash, content_hash, article_sketch, (bands, shingles), length) in enumerate(
            zip(docs, simhashes.tolist(), content_hashes, sketches, extras, lengths, strict=True)
        ):
            explained: tuple[tuple[str, float], ...] = ()
            if explain:
                # Reported like jieba's extract_tags: tf-idf divided by the number of term
                # occurrences.
                mine = keep[bounds[j] : bounds[j + 1]]
                mine = mine[np.lexsort((hashes[mine], -weights[mine]))]
                total = float(tf[term_bounds[j] : term_bounds[j + 1]].sum())
                explained = tuple(
                    zip(
                        [terms[k] for k in mine.tolist()],
                        (weights[mine] / total).tolist(),
                        strict=True,
                    )
                )
            results[i] = Fingerprint(
                simhash, content_hash, article_sketch, bands, shingles, length, explained
            )

    def _term_counts(self, terms: TermExtractor, title: str, content: str) -> Counter[str]:
        """How often each term occurs in the article, a title's counting `title_weight` times
        as much."""
        title_weight = self.options.title_weight
        if title_weight == 1.0:
            # The space keeps title and content words apart, so this equals counting each.
            return terms.count(f"{title} {content}")
        c = terms.count(content)
        for term, n in terms.count(title).items():
            c[term] = c.get(term, 0) + title_weight * n
        return c


def _with_empty_text_errors(
    results: list[Fingerprint | NewsdedupError | None],
) -> list[Fingerprint | NewsdedupError]:
    """Articles left without a result had no term to fingerprint."""
    return [EmptyTextError(_NOTHING_TO_FINGERPRINT) if r is None else r for r in results]


def _vote(weights: np.ndarray, hashes: np.ndarray, bounds: list[int]) -> np.ndarray:
    """The SimHashes of the articles whose terms are `bounds[j]:bounds[j + 1]` of `weights` and
    `hashes`: bit j of every term hash adds its weight for 1 and subtracts it for 0. One small
    integer product per article: a batch-wide segmented sum builds a 64-column temporary."""
    votes_w = np.rint(weights * _WEIGHT_SCALE).astype(np.int64)
    bits = np.unpackbits(
        hashes.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8),
        axis=1,
        bitorder="little",
    )
    votes = np.stack(
        [2 * (votes_w[a:b] @ bits[a:b]) - votes_w[a:b].sum() for a, b in pairwise(bounds)]
    )
    return np.packbits(votes > 0, axis=1, bitorder="little").view("<u8").ravel()


def _heaviest(weights: np.ndarray, hashes: np.ndarray, sizes: list[int], limit: int) -> np.ndarray:
    """Indices of each article's `limit` heaviest terms, in index order (the terms of article i
    are the `sizes[i]` after those of article i - 1). Equal weights (common: unknown words share
    the median IDF) go by ascending hash, so the choice never depends on the order words
    appeared in.

    The vote needs the choice, not an order: one sort by weight finds each article's
    limit-th weight, and only the terms tied at that weight are ordered by hash. Three times
    cheaper than sorting every term by (article, weight, hash).
    """
    if len(sizes) == 1:
        # One article (the per-article path): sorting its few hundred terms costs less than
        # the bookkeeping below.
        return np.sort(np.lexsort((hashes, -weights))[:limit])
    counts = np.array(sizes)
    starts = np.cumsum(counts) - counts
    doc = np.repeat(np.arange(len(sizes), dtype=np.int16), counts)  # BATCH < 2**15
    by_weight = np.argsort(-weights)
    # Stable by article (16-bit ids: a radix sort), so heaviest first within each article.
    by_weight = by_weight[np.argsort(doc[by_weight], kind="stable")]
    threshold = np.full(len(sizes), -np.inf)
    over = counts > limit
    threshold[over] = weights[by_weight[starts[over] + limit - 1]]
    article_threshold = threshold[doc]
    heavier = np.flatnonzero(weights > article_threshold)
    room = limit - np.bincount(doc[heavier], minlength=len(sizes))
    tied = np.flatnonzero(weights == article_threshold)
    tied = tied[np.argsort(hashes[tied])]
    tied = tied[np.argsort(doc[tied], kind="stable")]
    tied_doc = doc[tied]
    rank = np.arange(len(tied)) - np.searchsorted(tied_doc, tied_doc)
    return np.sort(np.concatenate((heavier, tied[rank < room[tied_doc]])))
