"""Term extraction from normalized text: jieba cuts for Chinese, a regex for other words.

Two engines cut Chinese: `jieba` (the reference: its dictionary and HMM define the cuts) and
`rjieba` (the same algorithm and dictionary in Rust, ~15× faster, identical cuts on Han text).
"""

from __future__ import annotations

import logging
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from functools import cache
from importlib import resources

import mmh3
import numpy as np

from consumer.config import ENGINES
from consumer.errors import ConfigError
from consumer.fingerprint.tablecache import cached, unicode_version

Segmenter = Callable[[str], list[str]]

# The segmenters see only runs of the CJK ideographs jieba's own block regex treats as Chinese
# (U+4E00–U+9FD5), joined by spaces. The two engines differ only in how they split ASCII inside
# mixed runs ("iphone手机"), so keeping everything else away from them is what makes their cuts
# identical; Latin words and numbers come from `_WORD` instead.
_HAN_RUN = re.compile(r"[\u4e00-\u9fd5]+")
# A word: letters or digits of any script except CJK ideographs, with inner
# apostrophes and inner dots/commas kept ("don't", "u.s", "3.5", "1,200"), so numbers and
# abbreviations stay one term. Ideographs outside jieba's range (extensions, compatibility
# block) are rare and dropped.
_WORD_CHAR = r"[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
_WORD = re.compile(rf"{_WORD_CHAR}+(?:['’.,]{_WORD_CHAR}+)*")


def hash_terms(terms: Iterable[str]) -> np.ndarray:
    """Unsigned 64-bit term hashes: the first half of mmh3 x64 128 of the UTF-8 term (what
    `mmh3.hash64(term, signed=False)[0]` returns), computed in one C-level pass."""
    digests = b"".join(map(mmh3.hash_bytes, terms))
    return np.frombuffer(digests, dtype="<u8")[::2].astype(np.uint64)


@cache
def char_bitmap(char_class: str) -> bytes:
    """One bit per code point, little-endian bit order: set where the regex character class
    `char_class` matches (~0.02–0.15 s to build, once per class and Unicode version, then read
    from the table cache).

    Hands a regex's notion of a letter or digit (the running Python's Unicode tables) to the
    native kernel, which could not rebuild it exactly from its own tables.
    """
    depends_on = unicode_version() + b"/" + char_class.encode("utf-8", "surrogatepass")
    arrays = cached("char-bitmap", depends_on, ("bits",), lambda: _build_bitmap(char_class))
    return arrays["bits"].tobytes()


def _build_bitmap(char_class: str) -> dict[str, np.ndarray]:
    every = (
        np.arange(sys.maxunicode + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    )
    bits = np.zeros(len(every), dtype=bool)
    # Runs, not single characters: a few hundred matches instead of a hundred thousand.
    for m in re.finditer(f"{char_class}+", every):
        bits[m.start() : m.end()] = True
    return {"bits": np.packbits(bits, bitorder="little")}


def word_char_bitmap() -> bytes:
    """`char_bitmap` of `_WORD_CHAR`: the characters of Latin words and numbers."""
    return char_bitmap(_WORD_CHAR)


def _read_word_list(name: str) -> frozenset[str]:
    text = resources.files("consumer").joinpath("data", name).read_text(encoding="utf-8")
    words: set[str] = set()
    for line in text.splitlines():
        words.update(line.split("#", 1)[0].split())
    return frozenset(words)


@cache
def stop_words() -> frozenset[str]:
    """Chinese and English stop words (package data), in normalized form."""
    return _read_word_list("stopwords_zh.txt") | _read_word_list("stopwords_en.txt")


@cache
def load_segmenter(engine: str) -> Segmenter:
    """The `cut` function of an engine, with HMM on (jieba's default, and the reference)."""
    if engine == "rjieba":
        import rjieba

        cut = rjieba.cut
        return lambda text: cut(text, True)
    if engine == "jieba":
        import jieba

        # jieba logs its dictionary loading at DEBUG on stderr, which would garble CLI output.
        jieba.setLogLevel(logging.WARNING)
        jieba.dt.initialize()
        lcut = jieba.dt.lcut
        return lambda text: lcut(text, HMM=True)
    raise ConfigError(
        f"option [fingerprint] engine must be one of {', '.join(ENGINES)}: {engine!r}"
    )


class TermExtractor:
    """Counts the terms of normalized text: words of two or more characters, not stop words.

    Dropping single characters and stop words follows jieba's TF-IDF keyword extraction.
    """

    __slots__ = ("_cut", "_stop")

    def __init__(self, engine: str = "rjieba") -> None:
        self._cut = load_segmenter(engine)
        self._stop = stop_words()

    def count(self, text: str) -> Counter[str]:
        """Term → number of occurrences."""
        stop = self._stop
        # Filtering before counting is cheaper: the length test drops most tokens (的, 在, 了,
        # the separator space) without hashing them, and the stop-word test hashes the rest
        # once, a hash that `Counter` then reuses.
        han = " ".join(_HAN_RUN.findall(text))
        terms = [t for t in self._cut(han) if len(t) > 1 and t not in stop]
        # `_WORD` skips ideographs as it skips spaces, so it can scan the whole text.
        terms += [w for w in _WORD.findall(text) if len(w) > 1 and w not in stop]
        return Counter(terms)
