"""The verification sketch estimates the shingle Jaccard that the evaluation judges by."""

from __future__ import annotations

import random
import re
import sys
import unicodedata
from itertools import pairwise

import mixed_script
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.evaluation import truth
from consumer.fingerprint.fingerprinter import Fingerprinter
from consumer.fingerprint.kernel import load_kernel
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.sketch import (
    _DROPPED,
    _KEPT,
    _LATIN_CAPITAL,
    _LATIN_LETTER,
    _LETTER,
    _WORD_CHAR,
    LETTERS_KEY_BYTES,
    LETTERS_KEY_CHARS,
    MIXED_LATIN_SHARE,
    PAGE_OTHER_SCRIPT_LETTERS,
    SENTENCE_CHARS,
    SKETCH_BYTES,
    _classes,
    _code_points,
    _latin_in_words,
    equal_minima,
    estimate,
    letters_key,
    mixed_char_shingles,
    native_tables,
    same_letters,
    shingled_by_words,
    sketch,
    verification_data,
)

NORMALIZER = Normalizer(convert_traditional=True)


def normalized(title: str, content: str) -> str:
    t, c = NORMALIZER.many([title, content])
    return f"{t}\n{c}"


def corpus(name: str, n: int) -> list[dict]:
    path = shared_data_dir() / f"{name}.jsonl.gz"
    return [a for a in iter_jsonl(path, n * 2) if len(a.get("content") or "") >= 400][:n]


def truncated(article: dict, share: float) -> dict:
    content = article["content"]
    return {**article, "content": content[: int(len(content) * share)]}


def test_identical_texts_estimate_one_and_the_format_is_fixed() -> None:
    s = sketch("每日新闻 the same text, twice")
    assert len(s) == SKETCH_BYTES
    assert estimate(s, s) == 1.0


def test_sketches_are_deterministic() -> None:
    # A changed sketch silently breaks every index written before: these bytes must not move
    # unless the sketch's format changes on purpose (and the index layout with it).
    text = normalized("香港新聞", "立法會今日三讀通過修訂條例草案，政府表示歡迎。")
    assert sketch(text)[:1] == b"C"
    assert sketch(normalized("Reuters", "Shares of the company rose 5 pct on Monday."))[:1] == b"W"
    assert sketch(text).hex() == GOLDEN_SKETCH
    assert load_kernel(None).sketch(text).hex() == GOLDEN_SKETCH


GOLDEN_SKETCH = (
    "43b81dd8928118b7d54a3b3296f84ae6a30f041fa820c11716c01ed7054a28918c"
    "314bb2d931c7b0d49343e5630de9c300f72e8d42e432f07545ce6f02f6896e77"
)


@pytest.mark.parametrize(
    ("name", "tolerance"),
    [("zh_hkcnews_2017_2022", 0.16), ("zh_cctv_xwlb_2022_2026", 0.16), ("en_reuters21578", 0.2)],
)
def test_estimates_follow_the_exact_jaccard_on_real_text(name: str, tolerance: float) -> None:
    articles = corpus(name, 60)
    rng = random.Random(7)
    errors = []
    for a in articles:
        for b in (truncated(a, rng.uniform(0.4, 0.95)), rng.choice(articles)):
            exact = truth.similarity(
                truth.article_text(a["title"], a["content"]),
                truth.article_text(b["title"], b["content"]),
            )
            est = estimate(
                sketch(normalized(a["title"], a["content"])),
                sketch(normalized(b["title"], b["content"])),
            )
            if est is not None:  # hkcnews has a few English articles: other shingling
                errors.append(est - exact)
    assert len(errors) >= 100
    errors = np.abs(np.array(errors))
    # 128 four-bit minima: standard error about 0.05 at J = 0.5; bias must be small.
    assert np.quantile(errors, 0.95) <= tolerance
    assert errors.mean() <= 0.05


def test_unrelated_articles_estimate_near_zero() -> None:
    articles = corpus("zh_hkcnews_2017_2022", 40)
    checked = 0
    for a, b in pairwise(articles):
        texts = [truth.article_text(x["title"], x["content"]) for x in (a, b)]
        if truth.similarity(*texts) >= 0.05:
            continue  # the corpus has real reposts next to each other
        est = estimate(*(sketch(normalized(x["title"], x["content"])) for x in (a, b)))
        if est is not None:
            checked += 1
            assert est < 0.2
    assert checked >= 20


# Minima that stress the zero-nibble count: 0x0, 0x7, 0x8 and 0xF next to each other.
minimum_nibbles = st.sampled_from([0x0, 0x1, 0x7, 0x8, 0xE, 0xF]) | st.integers(0, 15)


def packed(minima: list[int]) -> bytes:
    """Four-bit minima two to a byte, bin 2i in the low half of byte i (the sketch's order)."""
    return bytes(lo | hi << 4 for lo, hi in zip(minima[0::2], minima[1::2], strict=True))


@given(
    st.lists(minimum_nibbles, min_size=128, max_size=128),
    st.lists(st.tuples(st.integers(0, 127), minimum_nibbles), max_size=128),
)
def test_equal_minima_counts_what_a_minimum_by_minimum_comparison_counts(
    minima: list[int], changes: list[tuple[int, int]]
) -> None:
    other = list(minima)
    for at, value in changes:
        other[at] = value
    a, b = b"C" + packed(minima), b"C" + packed(other)
    expected = sum(x == y for x, y in zip(minima, other, strict=True))
    assert equal_minima(a, b) == expected == equal_minima(b, a)


def test_sketches_of_the_first_format_are_not_comparable() -> None:
    # An index written before the format changed holds sketches of 64 one-byte minima (kinds
    # "c" and "w"): comparing their bytes as four-bit minima would estimate nonsense.
    current = sketch(normalized("新聞", "立法會今日三讀通過修訂條例草案，政府表示歡迎。"))
    first_format = b"c" + current[1:]
    assert estimate(current, first_format) is None
    assert estimate(first_format, first_format) is None


_LETTERS = st.characters(categories=("Lu", "Ll", "Lo", "Nd"))
_NOT_LETTERS = st.sampled_from(list(" \n，。、！？!?,.;:-#{}[]()《》「」\"'"))


@settings(max_examples=300, deadline=None)
@given(st.text(_LETTERS, min_size=1, max_size=80), st.data())
def test_letters_keys_ignore_punctuation_and_spacing_and_nothing_else(
    letters: str, data: st.DataObject
) -> None:
    key = letters_key(letters)
    # Punctuation and spacing anywhere, any amount: the same key.
    pieces = list(letters)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(pieces)))
        pieces.insert(at, data.draw(_NOT_LETTERS))
    assert letters_key("".join(pieces)) == key
    # Any letter or digit changed, dropped or added: another key.
    at = data.draw(st.integers(0, len(letters) - 1))
    other = data.draw(_LETTERS.filter(lambda c: c != letters[at]))
    assert letters_key(letters[:at] + other + letters[at + 1 :]) != key
    assert letters_key(letters[:at] + letters[at + 1 :]) != key
    assert letters_key(letters + other) != key


def test_only_short_texts_carry_a_letters_key_and_it_never_changes_an_estimate() -> None:
    short = normalized("国务院召开常务会议 部署稳就业工作", "")
    repunctuated = normalized("国务院召开常务会议，部署稳就业工作。", "{{}}")
    long = normalized("新聞", "立法會今日三讀通過修訂條例草案，政府表示歡迎。" * 12)
    assert len(short) < LETTERS_KEY_CHARS <= len(long)
    short_data = verification_data(sketch(short), short)
    assert len(short_data) == SKETCH_BYTES + LETTERS_KEY_BYTES
    assert verification_data(sketch(long), long) == sketch(long)
    assert same_letters(short_data, verification_data(sketch(repunctuated), repunctuated))
    assert not same_letters(short_data, sketch(short))  # a record written without a key
    long_data = verification_data(sketch(long), long)
    assert not same_letters(long_data, long_data)  # long texts are never matched by letters
    assert estimate(short_data, sketch(repunctuated)) == estimate(
        sketch(short), sketch(repunctuated)
    )
    assert estimate(short_data, long_data) == estimate(sketch(short), sketch(long))


def test_different_shinglings_are_not_comparable() -> None:
    chinese = sketch(normalized("新聞", "立法會今日三讀通過修訂條例草案。"))
    english = sketch(normalized("News", "The council passed the amended bill today."))
    assert estimate(chinese, english) is None
    assert estimate(chinese, b"") is None
    # Verification data too: neither text is of mixed script, so neither has a second sketch.
    chinese_text = normalized("新聞", "立法會今日三讀通過修訂條例草案。")
    english_text = normalized("News", "The council passed the amended bill today.")
    assert (
        estimate(
            verification_data(sketch(chinese_text), chinese_text),
            verification_data(sketch(english_text), english_text),
        )
        is None
    )


def test_a_mixed_script_text_and_its_copy_across_the_latin_line_compare_by_characters() -> None:
    original = normalized("", mixed_script.ORIGINAL)
    copy = normalized("", mixed_script.COPY)
    assert shingled_by_words(sketch(original)) and not shingled_by_words(sketch(copy))
    assert estimate(sketch(original), sketch(copy)) is None  # the sketches alone cannot
    original_data = verification_data(sketch(original), original)
    copy_data = verification_data(sketch(copy), copy)
    # A sentence: its sketch, its letters key, its character sketch.
    assert len(original_data) == 2 * SKETCH_BYTES + LETTERS_KEY_BYTES
    similarity = estimate(original_data, copy_data)
    assert similarity is not None
    assert similarity == estimate(copy_data, original_data)
    assert abs(similarity - truth.similarity(mixed_script.ORIGINAL, mixed_script.COPY)) < 0.1
    # A text that is not of mixed script carries no second sketch: English (even with an
    # accented name), Chinese, and a word-shingled text at MIXED_LATIN_SHARE or more Latin.
    english = normalized("", "Café owners in the city centre welcomed the new parking rules " * 5)
    chinese = normalized("", mixed_script.REPORT.split("The")[0])
    assert mixed_char_shingles(english) is None and mixed_char_shingles(chinese) is None
    # Words of four Latin letters beside five Chinese letters: 12 words reach MIXED_LATIN_SHARE.
    assert 44 / 49 < MIXED_LATIN_SHARE <= 48 / 53
    assert mixed_char_shingles("立法會今日" + " plus" * 12) is None
    assert mixed_char_shingles("立法會今日" + " plus" * 11) is not None


def test_a_chinese_page_quoting_a_long_english_passage_is_shingled_by_characters() -> None:
    # Three quarters of its letters Latin, but 153 Chinese: a page with PAGE_OTHER_SCRIPT_LETTERS
    # of another script is shingled by characters, and so is its copy with less of the English.
    report = normalized("", mixed_script.REPORT)
    copy = normalized("", mixed_script.REPORT_COPY)
    letters = [c for c in report if c.isalpha()]
    assert sum(c.isascii() for c in letters) >= 0.75 * len(letters)
    assert not shingled_by_words(sketch(report)) and not shingled_by_words(sketch(copy))
    similarity = estimate(sketch(report), sketch(copy))
    assert similarity is not None
    assert abs(similarity - truth.similarity(mixed_script.REPORT, mixed_script.REPORT_COPY)) < 0.1
    # Fewer letters of another script: an English page that quotes a name or two.
    quoting = normalized("", "Premier Li Qiang (李强) met the delegation on Monday. " * 5)
    assert len(quoting) >= SENTENCE_CHARS and shingled_by_words(sketch(quoting))
    assert load_kernel(None).sketch(quoting) == sketch(quoting)
    assert load_kernel(None).sketch(report) == sketch(report)


def latin_in_words(text: str) -> int:
    points = _code_points(text)
    return _latin_in_words(points, _classes()[points])


def test_latin_letters_count_as_words_only_in_runs_written_as_words() -> None:
    assert latin_in_words("the Court ruled; NATO and Élysée agreed") == 32
    # Digits, mixed case and runs longer than a word are no words of prose.
    assert latin_in_words("COVID19 iPhone 5G a3f9bc0e aVeryLongIdentifierOfCode") == 0
    assert latin_in_words("x" * 24 + " " + "y" * 25) == 24
    assert latin_in_words("李克强会见Smith，iPhone发布") == 5


def test_a_blob_of_base64_does_not_turn_a_chinese_story_to_word_shingles() -> None:
    rng = random.Random(7)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    blob = "".join(rng.choice(alphabet) for _ in range(400))
    assert latin_in_words(blob) < 20
    story = "國務院總理今日會見來訪的外國代表團，雙方就經貿合作交換意見。"
    for text in (normalized("", story + "\n" + blob), normalized("", blob + story * 3)):
        assert not shingled_by_words(sketch(text))
        assert load_kernel(None).sketch(text) == sketch(text)
    # English prose stays shingled by words, with its numbers and brand names.
    english = "Apple said the iPhone 15 sold 20 million units in China, up 12% on the year. "
    assert shingled_by_words(sketch(normalized("", english * 3)))


def test_a_page_is_shingled_by_words_from_three_quarters_latin_a_sentence_from_half() -> None:
    # About 60 % of the letters Latin: a sentence by words, a page of the same mix (a Chinese
    # story under an English footer) by characters; at 80 % a page by words, unless it has
    # PAGE_OTHER_SCRIPT_LETTERS of another script.
    chinese, english = "立法會今日三讀通過修訂條例草案", "the council passed the amended bill "
    sentence = normalized("", chinese + english)
    assert len(sentence) < SENTENCE_CHARS and shingled_by_words(sketch(sentence))
    page = normalized("", (chinese + english) * 8)
    assert len(page) >= SENTENCE_CHARS and not shingled_by_words(sketch(page))
    mostly_latin = normalized("", (chinese[:2] + english) * 6)
    assert len(mostly_latin) >= SENTENCE_CHARS and shingled_by_words(sketch(mostly_latin))
    assert PAGE_OTHER_SCRIPT_LETTERS == 16
    assert shingled_by_words(sketch(normalized("", chinese + english * 13)))
    assert not shingled_by_words(sketch(normalized("", chinese + "立" + english * 13)))
    for text in (sentence, page, mostly_latin):
        latin = sum(c.isascii() and c.isalpha() for c in text)
        letters = sum(c.isalpha() for c in text)
        assert 0.55 < latin / letters < 0.7 or latin / letters > 0.75
    # The native kernel draws the same lines.
    fingerprinter = Fingerprinter(native=True)
    for content, by_words in ((chinese + english, True), ((chinese + english) * 8, False)):
        assert fingerprinter.fingerprint("", content).sketch[:1] == (b"W" if by_words else b"C")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_a_sketch(text: str) -> None:
    n = normalized("", text)
    s = sketch(n)
    assert len(s) == SKETCH_BYTES
    assert estimate(s, s) == 1.0
    assert load_kernel(None).sketch(n) == s  # the native kernel's, too
    # Verification data, whatever parts it holds, reads back as the sketch it starts with.
    data = verification_data(s, n)
    assert data[:SKETCH_BYTES] == s
    assert estimate(data, data) == estimate(data, s) == estimate(s, data) == 1.0
    assert same_letters(data, data) == (len(n) < LETTERS_KEY_CHARS)


def category_class(cp: int) -> int:
    """The sketch's class of a code point, straight from its Unicode category."""
    category = unicodedata.category(chr(cp))
    kind = category[0]
    if kind == "L" and cp < 0x250:
        return _LATIN_CAPITAL if category in ("Lu", "Lt") else _LATIN_LETTER
    if kind == "L":
        return _LETTER
    return _KEPT if kind in "MN" else _DROPPED


def test_code_point_classes_follow_the_unicode_categories() -> None:
    classes = _classes()
    assert len(classes) == sys.maxunicode + 1
    sample = [*range(0x3000), *range(0x4DB0, 0x4E10), *range(0xFF00, 0x10000)]
    sample += [0x1D400, 0x20000, 0x1F600, 0xE0100, 0x10FFFF]
    for cp in sample:
        assert classes[cp] == category_class(cp), hex(cp)


def test_native_tables_are_the_classes_and_the_word_regex() -> None:
    classes, word_chars = native_tables()
    assert classes == _classes().tobytes()
    word_char = re.compile(_WORD_CHAR)
    for cp in [*range(0x3000), *range(0xFF00, 0x10000), 0x1D400, 0x20000, 0x1F600]:
        assert bool(word_chars[cp >> 3] >> (cp & 7) & 1) == bool(word_char.match(chr(cp)))
    assert len(word_chars) * 8 == sys.maxunicode + 1
