"""The verification sketch: 65 bytes per article that estimate how much two articles share.

SimHash finds candidates: articles whose fingerprints lie within k bits. At the k that news
needs for recall (10–12 bits), unrelated articles on the same topic come within k too,
so each candidate is verified by the Jaccard similarity of the two articles' shingle sets —
character 5-grams of letters and digits, or word 3-grams for Latin-script text, the same
measure the accuracy evaluation judges by — estimated from these sketches.

A sketch is one byte naming the shingling (characters or words, and the sketch's format) and
128 four-bit minima, two to a byte. Two articles shingled differently (an article right at the
Latin/non-Latin boundary and its copy on the other side) are compared by characters when the
word-shingled one is of mixed script, which then carries a second, character sketch, or by
words when the character-shingled one is a page of Latin words shingled so only for its
letters of another script, which then carries a second, word sketch; otherwise
they, like sketches of another format, have no comparable sketch, and `estimate` says so with
None. A text shorter than `LETTERS_KEY_CHARS` also carries, after its sketch, a 16-byte key of
its letters and digits: what a short text is matched by (consumer/deciding/rules.py). All of it is
the article's verification data (`verification_data`).

The minima are one-permutation MinHash (Li, Owen, Zhang, NIPS 2012) with 128 bins and
rotation densification for empty bins (Shrivastava, Li, ICML 2014), keeping 4 bits of each
bin's minimum (b-bit minwise hashing, Li, König, WWW 2010). In the same 64 bytes, 128 four-bit
minima estimate with a standard error of 0.047 at J = 0.5, 64 one-byte minima (the first
format, kinds "c" and "w") with 0.063: chance agreements of 1 in 16 cost less than half the
bins. Shingles are hashed once and sorted once, so a sketch costs a few tens of microseconds
for a 1,600-character article.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache

import mmh3
import numpy as np

from consumer.fingerprint.tablecache import cached, unicode_version
from consumer.fingerprint.terms import char_bitmap, hash_terms
from consumer.formats import LETTERS_KEY_CHARS

MINIMA = 128
MINIMUM_BITS = 4
SKETCH_BYTES = 1 + MINIMA * MINIMUM_BITS // 8
LETTERS_KEY_BYTES = 16
# Below this share of Latin letters, a text shingled by words also carries a character sketch.
MIXED_LATIN_SHARE = 0.9
CHAR_SHINGLE = 5
# A text shorter than this (in characters, normalized) is a sentence or two: shingled by words
# from half of its letters Latin on (`_by_words`). The default `[match] sentence_chars`.
SENTENCE_CHARS = 200
# A page (`SENTENCE_CHARS` or longer) with at least this many letters of scripts other than
# Latin is shingled by characters, however much Latin it holds (`_by_words`).
PAGE_OTHER_SCRIPT_LETTERS = 16
WORD_SHINGLE = 3

# Upper case: the second format (the first, "c" and "w", kept 64 one-byte minima).
_CHARS, _WORDS = b"C", b"W"
_KINDS = frozenset(_CHARS + _WORDS)
_NIBBLE = np.uint64(0xF)
_U64 = np.uint64
# Two odd multipliers of the polynomial shingle hash; any odd constants with mixed bits work.
_P1 = _U64(0x9E3779B97F4A7C15)
_P2 = _U64(0xC2B2AE3D27D4EB4F)
# Two equal minima by chance, between sketches of unrelated texts.
_CHANCE = 1 / (1 << MINIMUM_BITS)

# Words of the word shingling: runs of letters and digits of any script.
_WORD_CHAR = r"[^\W_]"
_WORD = re.compile(f"{_WORD_CHAR}+")


# Classes of code points: what shingles keep, and what decides word or character shingles.
# Latin capitals are a class of their own, for `_latin_in_words`.
_DROPPED, _KEPT, _LETTER, _LATIN_LETTER, _LATIN_CAPITAL = 0, 1, 2, 3, 4
# Longer than a word of a news story: a token, a hash, a run of encoded data.
LONGEST_WORD = 24


@cache
def _classes() -> np.ndarray:
    """The class of every code point: letters (general category L) are kept and are Latin
    letters below U+0250, capitals (Lu, Lt) among them; marks (M) and digits and other
    numbers (N) are kept; everything else is dropped. Built once (~0.06 s) per Unicode
    version, then read from the cache."""
    tables = cached("unicode-classes-cased", unicode_version(), ("classes",), _build_classes)
    return tables["classes"]


def _build_classes() -> dict[str, np.ndarray]:
    category = unicodedata.category
    # The first letter of each code point's category, then one vectorized pass.
    kinds = np.frombuffer(
        "".join([category(chr(cp))[0] for cp in range(sys.maxunicode + 1)]).encode("ascii"),
        dtype=np.uint8,
    )
    letter = kinds == ord("L")
    classes = np.full(len(kinds), _DROPPED, dtype=np.int8)
    classes[(kinds == ord("M")) | (kinds == ord("N"))] = _KEPT
    classes[letter] = _LETTER
    classes[:0x250][letter[:0x250]] = _LATIN_LETTER
    for cp in range(0x250):
        if category(chr(cp)) in ("Lu", "Lt"):
            classes[cp] = _LATIN_CAPITAL
    return {"classes": classes}


def native_tables() -> tuple[bytes, bytes]:
    """For the native kernel, which must sketch exactly as this module: the class of every
    code point (one byte each) and the word characters (one bit each, as
    `consumer.fingerprint.terms.char_bitmap`)."""
    return _classes().tobytes(), char_bitmap(_WORD_CHAR)


def _fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer: spreads every input bit over every output bit."""
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U64(33))


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _char_shingles(points: np.ndarray) -> np.ndarray:
    chars = points.astype(np.uint64)
    if len(chars) <= CHAR_SHINGLE:
        # A text shorter than one shingle is one shingle of itself.
        h = _U64(len(chars))
        for c in chars:
            h = h * _P1 + c
        return np.array([h], dtype=np.uint64)
    n = len(chars) - CHAR_SHINGLE + 1
    h = np.zeros(n, dtype=np.uint64)
    for i in range(CHAR_SHINGLE):
        h = h * _P1 + chars[i : i + n]
    return h


def _word_shingles(text: str) -> np.ndarray:
    words = _WORD.findall(text)
    if not words:
        return np.zeros(0, dtype=np.uint64)
    w = hash_terms(words)
    if len(w) <= WORD_SHINGLE:
        h = _U64(len(w))
        for x in w:
            h = h * _P2 + x
        return np.array([h], dtype=np.uint64)
    n = len(w) - WORD_SHINGLE + 1
    h = np.zeros(n, dtype=np.uint64)
    for i in range(WORD_SHINGLE):
        h = h * _P2 + w[i : i + n]
    return h


def _letter_counts(points: np.ndarray, classes: np.ndarray) -> tuple[int, int, int]:
    """(letters, Latin letters, Latin letters of words) of a text's code points and their
    classes. Those of words are `_latin_in_words` in a text with letters of other scripts (all
    its Latin letters in a text of Latin script, whatever it holds: a table of prices is still
    shingled by words, as the evaluation's truth does), counted only where they matter: where
    the Latin letters, all of them, would make the text one shingled by words."""
    counts = np.bincount(classes, minlength=5)
    latin = int(counts[_LATIN_LETTER] + counts[_LATIN_CAPITAL])
    letters = int(counts[_LETTER]) + latin
    if latin == letters:
        return letters, latin, latin
    if not _latin_enough(letters, latin, len(points)):
        return letters, latin, 0
    return letters, latin, _latin_in_words(points, classes)


def _latin_in_words(points: np.ndarray, classes: np.ndarray) -> int:
    """How many Latin letters are in runs of Latin letters and ASCII digits that read as
    words: no digit, at most `LONGEST_WORD` letters, and written in small letters, in
    capitals, or capitalized. Base64, hashes and tokens are rarely any of these (a 400-character
    blob of base64 has a few letters in such runs), and they must not weigh as prose when the
    shingling is chosen."""
    capital = classes == _LATIN_CAPITAL
    digit = (points >= 0x30) & (points <= 0x39)
    member = np.concatenate(([False], capital | (classes == _LATIN_LETTER) | digit, [False]))
    edges = np.diff(member.astype(np.int8))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if len(starts) == 0:
        return 0
    lengths = ends - starts
    digits = np.concatenate(([0], np.cumsum(digit)))
    capitals = np.concatenate(([0], np.cumsum(capital)))
    in_run = capitals[ends] - capitals[starts]
    words = (
        (digits[ends] == digits[starts])
        & (lengths <= LONGEST_WORD)
        & ((in_run == 0) | (in_run == lengths) | ((in_run == 1) & capital[starts]))
    )
    return int(lengths[words].sum())


def _by_words(letters: int, latin: int, in_words: int, chars: int) -> bool:
    """Whether a text of `chars` characters, with these `_letter_counts`, is shingled by words:
    enough of its letters (`_latin_enough`) are Latin letters of words, and, in a page, fewer
    than `PAGE_OTHER_SCRIPT_LETTERS` are of other scripts.

    Base64 or a hash beside a short Chinese story is no Latin prose: counted as such, 400
    characters of it and an English footer made 141 of 300 unrelated cctv items under them
    copies (tests/cli/test_check_templates.py). And a Chinese page is shingled by characters
    however long the Latin text beside it: a template in English above a story of a line or
    two outweighs it three to one, and by words the template's keys were counted only by the
    few pages short enough to be shingled so, which were copies of each other before it was
    known and so never made it known: 300 unrelated cctv items of every length under a
    600-character English footer made 89 copies. An English page that quotes a name or two in
    Chinese has far fewer; one under a Chinese site's template is shingled by characters, and
    carries a word sketch beside (`_words_beside`) to compare with its copy without it."""
    if chars >= SENTENCE_CHARS and letters - latin >= PAGE_OTHER_SCRIPT_LETTERS:
        return False
    return _latin_enough(letters, in_words, chars)


def _latin_outweighs(normalized: str) -> bool:
    """Whether a page may be one that `_words_beside` carries a word sketch for: at least as
    many of its characters are in Latin-1 as beyond it. Such a page has three Latin letters
    for each of another script, so this misses one only where most characters beyond Latin-1
    are no letters; a Chinese page is settled here for ~2 µs."""
    if len(normalized) < SENTENCE_CHARS:
        return False
    latin_1 = len(normalized.encode("latin-1", "ignore"))
    return 2 * latin_1 >= len(normalized)


def _words_beside(letters: int, latin: int, in_words: int, chars: int) -> bool:
    """Whether a page shingled by characters only for its letters of another script
    (`PAGE_OTHER_SCRIPT_LETTERS`) would otherwise be shingled by words: it also carries a word
    sketch, so that its copy without them (an English story, and the same story under a
    Chinese site's template) compares with it."""
    return (
        chars >= SENTENCE_CHARS
        and letters - latin >= PAGE_OTHER_SCRIPT_LETTERS
        and _latin_enough(letters, in_words, chars)
    )


def _latin_enough(letters: int, latin: int, chars: int) -> bool:
    """Whether `latin` of `letters` letters make a text of `chars` characters one shingled by
    words: at least three quarters, or, in a sentence or two (under `SENTENCE_CHARS`), half.

    Not half in a page: a Chinese page under a template in English (navigation, a
    subscription prompt, the copyright lines) can have more Latin letters than Chinese ones.
    Shingled by words, its story would be a handful of "words" (the runs of Chinese between
    punctuation marks) beside a hundred word 3-grams of the template, and unrelated stories
    of the site copies of each other: 196 of 200 briefs of 300-450 characters under one
    600-character English footer were. Shingled by characters, the story counts for its
    length, and the template is learned as such. A sentence keeps the half: shingled by words
    it is held to the stricter bar of a Latin-script sentence (`[match] sentence_min_jaccard`),
    which keeps the paraphrases of PAWS-X that share their names in English apart (precision
    0.995; by characters, 0.979). Integer arithmetic, as the native kernel does it."""
    if letters == 0:
        return False
    if chars < SENTENCE_CHARS:
        return 2 * latin >= letters
    return 4 * latin >= 3 * letters


def _mixed(letters: int, latin: int, in_words: int, chars: int) -> bool:
    """Whether a text shingled by words also carries a character sketch: less than
    `MIXED_LATIN_SHARE` of its letters are Latin. Its copy can fall on the other side of the
    three-quarters line (a Chinese article with a long English passage, its copy without
    it), and a pair on both sides is compared by characters, as the evaluation's truth
    does."""
    return _by_words(letters, latin, in_words, chars) and latin < MIXED_LATIN_SHARE * letters


def _hashed_char_shingles(kept: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return _fmix64(_char_shingles(kept))


def shingle_hashes(normalized: str) -> tuple[bytes, np.ndarray]:
    """The shingling used and the 64-bit hashes of the shingles of normalized text (see
    `consumer.fingerprint.normalize`): word 3-grams when at least three quarters of its
    letters are Latin (half in a sentence: `_by_words`), else character 5-grams of its
    letters, marks and digits."""
    points = _code_points(normalized)
    classes = _classes()[points]
    if _by_words(*_letter_counts(points, classes), len(normalized)):
        with np.errstate(over="ignore"):
            return _WORDS, _fmix64(_word_shingles(normalized))
    return _CHARS, _hashed_char_shingles(points[classes != _DROPPED])


def mixed_char_shingles(normalized: str) -> np.ndarray | None:
    """The character 5-gram hashes of a text of mixed script (`_mixed`), else None."""
    points = _code_points(normalized)
    classes = _classes()[points]
    if not _mixed(*_letter_counts(points, classes), len(normalized)):
        return None
    return _hashed_char_shingles(points[classes != _DROPPED])


def _packed(shingling: bytes, hashes: np.ndarray) -> bytes:
    return packed_minima(shingling, bin_minima(hashes))


def packed_minima(shingling: bytes, minima: np.ndarray) -> bytes:
    """The sketch of a text shingled `shingling` whose `bin_minima` are these (the band keys
    of consumer/fingerprint/shingles.py are made of the same minima)."""
    # b-bit minwise hashing keeps the low 4 bits; bin 2i in the low half of byte i.
    kept = (minima & _NIBBLE).astype(np.uint8)
    return shingling + (kept[0::2] | (kept[1::2] << 4)).tobytes()


def sketch(normalized: str) -> bytes:
    """The sketch of normalized title + content (`SKETCH_BYTES` long)."""
    return _packed(*shingle_hashes(normalized))


def _letters_key_of(kept: np.ndarray) -> bytes:
    return mmh3.hash_bytes(kept.astype("<u4").tobytes(), seed=0, x64arch=True)


def letters_key(normalized: str) -> bytes:
    """mmh3 x64 128-bit hash of the letters, marks and digits of normalized text, in order:
    what two texts that differ only in punctuation, spacing or leftover markup share."""
    points = _code_points(normalized)
    return _letters_key_of(points[_classes()[points] != _DROPPED])


def verification_data(article_sketch: bytes, normalized: str) -> bytes:
    """What the index keeps to verify a candidate against this text: its sketch; then, for a
    text shorter than `LETTERS_KEY_CHARS`, its letters key; then a second sketch: of its
    characters for a word-shingled text of mixed script (`_mixed`), of its words for a page
    shingled by characters only for its letters of another script (`_words_beside`). Pure
    ASCII needs neither (no letter outside Latin), and nearly every other text is settled by
    cheap tests (`_latin_outweighs`): counting a text's letters by script costs ~12 µs for a
    hkcnews article, 4 % of its fingerprint."""
    short = len(normalized) < LETTERS_KEY_CHARS
    by_words = shingled_by_words(article_sketch)
    maybe_mixed = not normalized.isascii() and (by_words or _latin_outweighs(normalized))
    if not (short or maybe_mixed):
        return article_sketch
    points = _code_points(normalized)  # one pass over the text serves both
    classes = _classes()[points]
    kept = points[classes != _DROPPED]
    data = article_sketch
    if short:
        data += _letters_key_of(kept)
    if maybe_mixed:
        counts = _letter_counts(points, classes)
        if by_words and _mixed(*counts, len(normalized)):
            data += _packed(_CHARS, _hashed_char_shingles(kept))
        elif not by_words and _words_beside(*counts, len(normalized)):
            with np.errstate(over="ignore"):
                data += _packed(_WORDS, _fmix64(_word_shingles(normalized)))
    return data


def _parts(data: bytes) -> tuple[bytes, bytes | None, bytes | None]:
    """Verification data's sketch, letters key and second sketch (each None when absent):
    the lengths the three can add up to (65, 81, 130 and 146 bytes) are all different."""
    main, rest = data[:SKETCH_BYTES], data[SKETCH_BYTES:]
    key = None
    if len(rest) in (LETTERS_KEY_BYTES, LETTERS_KEY_BYTES + SKETCH_BYTES):
        key, rest = rest[:LETTERS_KEY_BYTES], rest[LETTERS_KEY_BYTES:]
    return main, key, rest if len(rest) == SKETCH_BYTES else None


def same_letters(a: bytes, b: bytes) -> bool:
    """Whether two articles' verification data hold the same letters key: the same letters
    and digits in the same order. An article without a key (a long text, a record written
    before keys existed) has the same letters as nothing."""
    key = _parts(a)[1]
    return key is not None and key == _parts(b)[1]


def bin_minima(hashes: np.ndarray, bins: int = MINIMA) -> np.ndarray:
    """The minimum of each of `bins` (a power of two) one-permutation MinHash bins of these
    shingle hashes (uint64, all of its bits), empty bins densified; all zeros for no hash.
    `tools/decision-frontier` sketches with other sizes through it."""
    if len(hashes) == 0:
        return np.zeros(bins, dtype=np.uint64)
    ordered = np.sort(hashes)
    bin_of = (ordered >> np.uint64(64 - bins.bit_length() + 1)).astype(np.int64)
    first = np.searchsorted(bin_of, np.arange(bins))  # each bin's minimum, where it has one
    present = np.zeros(bins, dtype=bool)
    in_range = first < len(ordered)
    present[in_range] = bin_of[first[in_range]] == np.arange(bins)[in_range]
    minima = np.zeros(bins, dtype=np.uint64)
    minima[present] = ordered[first[present]]
    if not present.all():
        # Rotation densification: an empty bin borrows the next non-empty bin's minimum,
        # salted by the distance, so two texts agree on it exactly when they agree there.
        filled = np.flatnonzero(present)
        idx = np.arange(bins)
        donor = filled[np.searchsorted(filled, idx) % len(filled)]
        distance = ((donor - idx) % bins).astype(np.uint64)
        with np.errstate(over="ignore"):
            borrowed = _fmix64(minima[donor] + distance * _P1)
        minima = np.where(present, minima, borrowed)
    return minima


def shingled_by_words(sketch: bytes) -> bool:
    """Whether a sketch is of word 3-grams (a mostly Latin-script text)."""
    return sketch[:1] == _WORDS


def estimate(a: bytes, b: bytes) -> float | None:
    """Estimated Jaccard similarity of the shingle sets behind two texts' verification data
    (0.0 to 1.0): of their sketches, or when those are of different shinglings, of the
    second sketch of one (`verification_data`) and the other's sketch. None when nothing
    compares (different shinglings and no character sketch, another format, no sketch)."""
    # Nearly every candidate's sketch compares with the item's at once: deciding calls this
    # for each one, and splitting the verification data first would cost a third of the call.
    if _comparable(a, b):
        return _estimated(a, b)
    sketch_a, _, chars_a = _parts(a)
    sketch_b, _, chars_b = _parts(b)
    for x, y in ((chars_a, sketch_b), (sketch_a, chars_b)):
        if x is not None and y is not None and _comparable(x, y):
            return _estimated(x, y)
    return None


def _comparable(a: bytes, b: bytes) -> bool:
    """Whether the sketches that start these two byte strings are of one shingling."""
    return len(a) >= SKETCH_BYTES and len(b) >= SKETCH_BYTES and a[0] == b[0] and a[0] in _KINDS


def _estimated(a: bytes, b: bytes) -> float:
    return max(0.0, (equal_minima(a, b) / MINIMA - _CHANCE) / (1 - _CHANCE))


# Every nibble 0x7, and every bit, over the minima.
_LOW3 = int.from_bytes(b"\x77" * (SKETCH_BYTES - 1))
_ALL = (1 << (8 * (SKETCH_BYTES - 1))) - 1


def equal_minima(a: bytes, b: bytes) -> int:
    """How many of two sketches' minima are equal: the zero nibbles of their XOR, counted on
    one 512-bit integer (a fifth of the cost of two NumPy views, and deciding calls this for
    every candidate). Per nibble v, (v & 0x7) + 0x7 has its high bit set unless v's low bits
    are all 0 and never carries into the next nibble; or-ing v and 0x7 leaves only zero
    nibbles with a clear high bit."""
    x = int.from_bytes(a[1:SKETCH_BYTES]) ^ int.from_bytes(b[1:SKETCH_BYTES])
    return (((x & _LOW3) + _LOW3 | x | _LOW3) ^ _ALL).bit_count()
