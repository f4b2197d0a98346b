"""The similarity truth of the evaluation: exact Jaccard of shingle sets of title + content.

Independent of newsdedup's fingerprinting on purpose, so the instrument does not share the
mistakes of what it measures.

Text is normalized by: HTML markup dropped (tags, script/style bodies, entities), Unicode NFKC,
case folding, Traditional→Simplified (OpenCC `t2s`, so a script conversion is not a change of
content), and removal of everything that is not a letter, mark or digit (whitespace,
punctuation, symbols). Shingles are then:

* two Latin-script texts (at least half of the letters of each are Latin): word 3-grams, as in
  the silver pair list of the English corpus;
* any other pair: character 5-grams of the normalized strings, as in the Chinese silver lists.

A text shorter than one shingle is one shingle of itself, so short identical texts still
compare as 1.0.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

CHAR_SHINGLE = 5
WORD_SHINGLE = 3

# Thresholds of issue 6: a match is correct at ≥ 0.5; a pair is a true near-duplicate at ≥ 0.8.
MATCH_JACCARD = 0.5
NEAR_DUP_JACCARD = 0.8

_SCRIPT_OR_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=1)
def _t2s() -> Callable[[str], str]:
    import opencc  # the C++ converter: ~23 M characters/s, so folding costs little

    return opencc.OpenCC("t2s").convert


def strip_markup(text: str) -> str:
    """Text of an HTML fragment; plain text passes through unchanged (apart from entities)."""
    if "<" in text:
        text = _SCRIPT_OR_STYLE.sub(" ", text)
        text = _TAG.sub(" ", text)
    return html.unescape(text) if "&" in text else text


def _keep(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


def _fold(text: str) -> str:
    """NFKC, case folding and Traditional→Simplified; whitespace and punctuation still there."""
    return _t2s()(unicodedata.normalize("NFKC", strip_markup(text)).casefold())


def is_latin_script(text: str) -> bool:
    """True when at least half of the letters are ASCII/Latin-1 letters (English wire text)."""
    letters = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            latin += ch < "\u0250"
    return letters > 0 and 2 * latin >= letters


def normalize(text: str) -> str:
    """The normalized character string that character shingles are cut from."""
    return "".join(ch for ch in _fold(text) if _keep(ch))


def _shingle_folded(folded: str, latin: bool) -> frozenset[str]:
    if latin:
        words = _WORD.findall(folded)
        if len(words) <= WORD_SHINGLE:
            return frozenset([" ".join(words)]) if words else frozenset()
        return frozenset(
            " ".join(words[i : i + WORD_SHINGLE]) for i in range(len(words) - WORD_SHINGLE + 1)
        )
    chars = "".join(ch for ch in folded if _keep(ch))
    if len(chars) <= CHAR_SHINGLE:
        return frozenset([chars]) if chars else frozenset()
    return frozenset(chars[i : i + CHAR_SHINGLE] for i in range(len(chars) - CHAR_SHINGLE + 1))


def shingles(text: str, latin: bool | None = None) -> frozenset[str]:
    """The shingle set of `text`: word 3-grams if `latin` (default: if the text is Latin
    script), else character 5-grams."""
    folded = _fold(text)
    return _shingle_folded(folded, is_latin_script(folded) if latin is None else latin)


def article_text(title: str, content: str) -> str:
    """What the truth compares: title and content, as one text."""
    return f"{title}\n{content}"


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two shingle sets; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    return inter / (len(a) + len(b) - inter)


def similarity(text_a: str, text_b: str) -> float:
    """Jaccard of two texts, shingled alike: word 3-grams only if both are Latin script.

    Deciding per pair keeps a mixed-script article comparable with its own edited copy when
    an edit tips its balance of scripts.
    """
    a, b = _fold(text_a), _fold(text_b)
    latin = is_latin_script(a) and is_latin_script(b)
    return jaccard(_shingle_folded(a, latin), _shingle_folded(b, latin))


class Truth:
    """Jaccard between articles of one feed by id, with a bounded cache of shingle sets.

    A shingle set of a 1.6k-character article takes ~150 kB, so caching every article of a
    34k-article corpus would take gigabytes; pairs are mostly close in time, so a small LRU
    cache holds what repeated lookups need.
    """

    def __init__(self, texts: dict[str, str], cache_size: int = 1024) -> None:
        self._texts = texts
        self._latin: dict[str, bool] = {}
        self._shingles = lru_cache(maxsize=cache_size)(self._compute)
        # Systems mostly agree on their matches, so each pair is computed once for all of them.
        self._pairs: dict[tuple[str, str], float] = {}

    def _is_latin(self, article_id: str) -> bool:
        latin = self._latin.get(article_id)
        if latin is None:
            latin = self._latin[article_id] = is_latin_script(_fold(self._texts[article_id]))
        return latin

    def _compute(self, article_id: str, latin: bool) -> frozenset[str]:
        return shingles(self._texts[article_id], latin)

    def __call__(self, a: str, b: str) -> float:
        key = (a, b) if a <= b else (b, a)
        value = self._pairs.get(key)
        if value is None:
            latin = self._is_latin(a) and self._is_latin(b)
            value = jaccard(self._shingles(a, latin), self._shingles(b, latin))
            self._pairs[key] = value
        return value
