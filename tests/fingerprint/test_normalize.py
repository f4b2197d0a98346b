"""Normalization: HTML, invisible characters, NFKC, case, Traditional→Simplified, whitespace."""

from __future__ import annotations

import gzip
import json
import time
import unicodedata
from itertools import islice

import opencc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.corpus import shared_data_dir
from consumer.fingerprint.normalize import Normalizer, nfkc, strip_html


@pytest.fixture(scope="module")
def normalize() -> Normalizer:
    return Normalizer()


def test_html_tags_entities_scripts_and_comments(normalize: Normalizer) -> None:
    html = (
        "<!DOCTYPE html><html><head><title>x</title><style>p {color: red}</style></head>"
        "<body><P class='lead'>Hello&nbsp;<b>Wor</b>ld &amp; co</p><script>if (a<b) x()</script>"
        "<!-- a comment --><div>second</div><br/>third</body></html>"
    )
    assert normalize(html) == "hello world & co second third"


def test_inline_tags_do_not_split_chinese_words(normalize: Normalizer) -> None:
    assert normalize("中<b>华</b>人民<a href='#'>共和国</a>") == "中华人民共和国"
    assert normalize("<p>第一段</p><p>第二段</p>") == "第一段 第二段"


def test_angle_brackets_in_plain_text_stay(normalize: Normalizer) -> None:
    # Reuters writes tickers and companies in angle brackets: they are words, not tags.
    assert (
        normalize("Shares of <TCB> and <Sedio N.V.> rose")
        == "shares of <tcb> and <sedio n.v.> rose"
    )


def test_unclosed_markup_swallows_the_rest_like_a_browser() -> None:
    assert strip_html("text <!-- never closed <b>x</b>").strip() == "text"
    assert strip_html("text <script>var a = '<p>';").strip() == "text"


def test_nfkc_case_and_whitespace(normalize: Normalizer) -> None:
    assert normalize("ＡＢＣ　１２３，Ｈｅｌｌｏ！\n\n\t Straße") == "abc 123,hello! strasse"


def test_invisible_characters_and_lone_surrogates_are_dropped(normalize: Normalizer) -> None:
    assert normalize("新\u200b闻\ufeff\u00ad报\x00道\ud800") == "新闻报道"
    assert normalize("a&#8203;b &#0;c") == "ab c"  # entities decoding to invisible characters


def test_traditional_becomes_simplified(normalize: Normalizer) -> None:
    assert normalize("香港特別行政區政府發言人") == "香港特别行政区政府发言人"
    assert Normalizer(convert_traditional=False)("發言人") == "發言人"


def test_simplified_and_its_traditional_repost_normalize_alike(normalize: Normalizer) -> None:
    """Real Simplified articles converted to Traditional (OpenCC s2t, as a repost would be)
    normalize to the same text as the original, for all but a tiny share of them."""
    s2t = opencc.OpenCC("s2t").convert
    path = shared_data_dir() / "zh_cctv_xwlb_2022_2026.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        articles = [json.loads(line) for line in islice(f, 300)]
    same = sum(normalize(a["content"]) == normalize(s2t(a["content"])) for a in articles)
    assert same / len(articles) >= 0.97


def test_fast_nfkc_equals_unicodedata_on_real_text() -> None:
    for name in ("zh_hkcnews_2017_2022", "en_reuters21578"):
        with gzip.open(shared_data_dir() / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in islice(f, 300):
                text = json.loads(line)["content"]
                assert nfkc(text) == unicodedata.normalize("NFKC", text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_fast_nfkc_equals_unicodedata(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_normalize_any_text_is_idempotent_enough_to_hash(text: str) -> None:
    normalize = Normalizer()
    out = normalize(text)
    out.encode("utf-8")  # no lone surrogates left for the hashes
    assert out == out.strip()
    assert "  " not in out


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F) | st.sampled_from("\u00a0\u3000\u00a8é")))
def test_ascii_text_leaves_printable_with_single_spaces(text: str) -> None:
    """Every control character, whitespace or not, is gone from the output, and no space is
    doubled or at an end: what lets ASCII text skip the printable scan at the end."""
    out = Normalizer(convert_traditional=False)(text)
    assert out.isprintable()
    assert out == " ".join(out.split())


@pytest.mark.parametrize(
    "hostile",
    ["<a" * 50_000, "<!--" * 25_000, "<script>" * 12_000, "<p " * 30_000 + "x", "&" * 100_000],
)
def test_hostile_markup_is_linear(normalize: Normalizer, hostile: str) -> None:
    start = time.process_time()
    normalize(hostile)
    assert time.process_time() - start < 2.0
