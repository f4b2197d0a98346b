"""Terms: the reference and fast engines agree, Latin words, stop words, single characters."""

from __future__ import annotations

import gzip
import json
from itertools import islice

import mmh3
import pytest

from consumer.corpus import shared_data_dir
from consumer.errors import ConfigError
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.terms import TermExtractor, hash_terms, stop_words


@pytest.fixture(scope="module")
def fast() -> TermExtractor:
    return TermExtractor("rjieba")


@pytest.fixture(scope="module")
def reference() -> TermExtractor:
    return TermExtractor("jieba")


def _normalized_articles(name: str, n: int) -> list[str]:
    normalize = Normalizer()
    with gzip.open(shared_data_dir() / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in islice(f, n)]
    return [normalize(f"{r['title']}\n{r['content']}") for r in records]


@pytest.mark.parametrize(
    ("corpus", "n"),
    [("zh_hkcnews_2017_2022", 400), ("zh_cctv_xwlb_2022_2026", 400), ("en_reuters21578", 300)],
)
def test_engines_agree_on_real_text(
    fast: TermExtractor, reference: TermExtractor, corpus: str, n: int
) -> None:
    texts = _normalized_articles(corpus, n)
    same = sum(fast.count(t) == reference.count(t) for t in texts)
    assert same / len(texts) >= 0.999


def test_engines_agree_on_mixed_script(fast: TermExtractor, reference: TermExtractor) -> None:
    # Inside mixed ASCII/Chinese runs the engines cut differently; they never see those runs.
    text = "iphone手机和a股市场在2023年上涨3.5%,t恤销量u.s.第一"
    assert fast.count(text) == reference.count(text)


def test_latin_words_and_numbers(fast: TermExtractor) -> None:
    counts = fast.count("the u.s. economy grew 3.5% in 2023, don't panic: gdp 1,200 bn, a b c")
    assert counts == {
        "u.s": 1,
        "economy": 1,
        "grew": 1,
        "3.5": 1,
        "2023": 1,
        "panic": 1,
        "gdp": 1,
        "1,200": 1,
        "bn": 1,
    }


def test_single_characters_and_stop_words_are_dropped(fast: TermExtractor) -> None:
    # 我们, 认为, 这个, 已经: stop words; 的, 了: single characters.
    counts = fast.count("我们认为这个政府的经济政策已经取得了成功")
    assert counts == {"政府": 1, "经济": 1, "政策": 1, "取得": 1, "成功": 1}


def test_counts_repeats(fast: TermExtractor) -> None:
    assert fast.count("香港 香港 news news news")["香港"] == 2
    assert fast.count("香港 香港 news news news")["news"] == 3


def test_stop_words_are_in_normalized_form() -> None:
    normalize = Normalizer()
    words = stop_words()
    assert len(words) > 400
    for word in words:
        assert normalize(word) == word, word
        assert len(word) >= 2, word


def test_unknown_engine_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="engine"):
        TermExtractor("spacy")


def test_hash_terms_is_mmh3_hash64() -> None:
    terms = ["香港", "trump", "3.5", "é"]
    assert hash_terms(terms).tolist() == [mmh3.hash64(t, signed=False)[0] for t in terms]
    assert hash_terms([]).size == 0
