"""Article fingerprints: a 64-bit SimHash of TF-IDF-weighted terms and an exact content hash.

Pure: text in, fingerprint out. Built once per process (`Fingerprinter`), then called per article.
"""

from __future__ import annotations

from dataclasses import dataclass

import mmh3
import numpy as np

from consumer.errors import ConfigError, InputError, NewsdedupError
from consumer.idf import load_idf
from consumer.normalize import Normalizer
from consumer.terms import ENGINES, TermExtractor, hash_terms

# Weights are rounded to multiples of 2**-16 before the vote so that the vote is an exact integer
# sum: a float sum's rounding depends on the order of addition (and on the BLAS build), which
# could flip a bit whose vote is near zero between machines. The largest possible sum
# (100k chars × idf ≈ 20 × 2**16) stays far below 2**63.
_WEIGHT_SCALE = float(1 << 16)


@dataclass(frozen=True, slots=True)
class FingerprintOptions:
    """What shapes a fingerprint; the `[fingerprint]` config section. Changing any option
    changes fingerprints, so an index must be rebuilt after a change."""

    engine: str = "rjieba"
    idf_path: str | None = None
    # Title terms count as much as body terms (1.0). Measured on real pairs (BENCHMARKS.md,
    # "Title weight"): more title weight moved true near-duplicates apart (re-titled reposts)
    # and pulled same-headline different-story items (wire series, "快讯") together.
    title_weight: float = 1.0
    # FINDINGS.md: top-64 terms keep the recall of all terms within 1 % at k ≤ 10 and lose none at
    # k = 3, and they keep a 100-word boilerplate footer from outvoting the story.
    max_terms: int | None = 64
    max_chars: int = 100_000
    convert_traditional: bool = True

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(
                f"option [fingerprint] engine must be one of {', '.join(ENGINES)}: {self.engine!r}"
            )
        if not self.title_weight >= 0:
            raise ConfigError("option [fingerprint] title_weight must be 0 or more")
        if self.max_terms is not None and self.max_terms < 1:
            raise ConfigError("option [fingerprint] max_terms must be 1 or more (or unset: all)")
        if self.max_chars < 1:
            raise ConfigError("option [fingerprint] max_chars must be 1 or more")


@dataclass(frozen=True, slots=True)
class Fingerprint:
    simhash: int  # unsigned, 0 <= simhash < 2**64
    content_hash: bytes  # mmh3 x64 128-bit of normalized title + "\n" + normalized content
    terms: tuple[tuple[str, float], ...] = ()  # only with explain=True: heaviest first

    @property
    def simhash_hex(self) -> str:
        return f"{self.simhash:016x}"

    @property
    def content_hash_hex(self) -> str:
        return self.content_hash.hex()


class EmptyTextError(NewsdedupError):
    """Nothing left to fingerprint: no term survives normalization and filtering."""


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    return (a ^ b).bit_count()


class Fingerprinter:
    """Normalizes, extracts terms, weights them by TF-IDF and votes a SimHash.

    Construction loads the IDF table (~0.3 s, once per process and path) and the segmenter.
    """

    __slots__ = ("_idf", "_normalize", "_terms", "options")

    def __init__(self, options: FingerprintOptions = FingerprintOptions()) -> None:
        self.options = options
        self._normalize = Normalizer(options.convert_traditional)
        self._terms = TermExtractor(options.engine)
        self._idf = load_idf(options.idf_path)

    def fingerprint(self, title: str, content: str, *, explain: bool = False) -> Fingerprint:
        if not isinstance(title, str) or not isinstance(content, str):
            raise InputError("title and content must be strings")
        limit = self.options.max_chars
        title = self._normalize(title[:limit])
        content = self._normalize(content[:limit])
        content_hash = mmh3.hash_bytes(f"{title}\n{content}".encode(), seed=0, x64arch=True)

        title_weight = self.options.title_weight
        if title_weight == 1.0:
            # The space keeps title and content words apart, so this equals counting each.
            counts = self._terms.count(f"{title} {content}")
        else:
            counts = self._terms.count(content)
            for term, n in self._terms.count(title).items():
                counts[term] = counts.get(term, 0) + title_weight * n
        n = len(counts)
        if n == 0:
            raise EmptyTextError(
                "nothing to fingerprint: after normalization the title and content hold no word "
                "of two or more characters that is not a stop word"
            )

        terms = list(counts)
        tf = np.fromiter(counts.values(), np.float64, n)
        hashes = hash_terms(terms)
        weights = tf * self._idf.lookup(hashes)

        max_terms = self.options.max_terms
        if explain or (max_terms is not None and n > max_terms):
            # Heaviest first; equal weights (common: unknown words share the median IDF) are
            # ordered by hash, so the choice never depends on the order words appeared in.
            keep = np.lexsort((hashes, -weights))[:max_terms]
            weights, hashes = weights[keep], hashes[keep]
        else:
            keep = None

        # Vote: bit j of every term hash adds its weight for 1 and subtracts it for 0.
        votes_w = np.rint(weights * _WEIGHT_SCALE).astype(np.int64)
        bits = np.unpackbits(
            hashes.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little"
        )
        votes = 2 * (votes_w @ bits.astype(np.int64)) - votes_w.sum()
        simhash = int.from_bytes(np.packbits(votes > 0, bitorder="little").tobytes(), "little")

        explained: tuple[tuple[str, float], ...] = ()
        if explain and keep is not None:
            # Reported like jieba's extract_tags: tf-idf divided by the number of term occurrences.
            total = float(tf.sum())
            explained = tuple(
                zip(
                    [terms[i] for i in keep.tolist()],
                    (weights / total).tolist(),
                    strict=True,
                )
            )
        return Fingerprint(simhash, content_hash, explained)
