"""The evaluation's similarity truth: Jaccard of shingle sets, normalization and its choices."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.evaluation import truth

ZH = "今天上午市政府召開記者會，宣布明年起推行新的公共交通優惠計劃，預計惠及三十萬名長者。"
EN = "The company said quarterly profit rose sharply on strong demand for its new products."


@given(st.text(max_size=300))
def test_identical_texts_are_one(text: str) -> None:
    assert truth.similarity(text, text) == 1.0


@given(st.text(max_size=200), st.text(max_size=200))
def test_symmetric_and_bounded(a: str, b: str) -> None:
    ab, ba = truth.similarity(a, b), truth.similarity(b, a)
    assert ab == ba
    assert 0.0 <= ab <= 1.0


def test_disjoint_texts_are_zero() -> None:
    assert truth.similarity(ZH, EN) == 0.0
    assert truth.similarity("甲乙丙丁戊己庚辛", "子丑寅卯辰巳午未") == 0.0


def test_hand_computed_character_jaccard() -> None:
    # "abcdefg" vs "abcdefx" as CJK: 3 five-grams each, 2 shared → 2 / 4.
    a, b = "一二三四五六七", "一二三四五六八"
    assert truth.similarity(a, b) == 0.5


def test_latin_text_uses_word_trigrams() -> None:
    assert truth.shingles("Profit rose sharply, the company said") == {
        "profit rose sharply",
        "rose sharply the",
        "sharply the company",
        "the company said",
    }


def test_cjk_text_uses_character_fivegrams_without_punctuation() -> None:
    assert truth.shingles("新聞，聯播！今天") == {"新闻联播今", "闻联播今天"}


def test_normalization_ignores_width_case_punctuation_markup_and_script() -> None:
    assert truth.similarity(ZH, ZH.replace("，", ",").replace("。", ".")) == 1.0
    assert truth.similarity("ＡＢＣ ｄｅｆ ｇｈｉ", "abc def ghi") == 1.0
    assert truth.similarity(EN, EN.upper()) == 1.0
    assert truth.similarity(EN, f"<div><p>{EN}</p><script>var x=1;</script></div>") == 1.0
    assert truth.similarity("歷史岔口回到從前", "历史岔口回到从前") == 1.0


def test_short_texts_are_one_shingle() -> None:
    assert truth.shingles("你好") == {"你好"}
    assert truth.shingles("") == frozenset()
    assert truth.similarity("", "") == 1.0
    assert truth.similarity("", "你好") == 0.0


def test_truth_by_id_caches_pairs_in_either_order() -> None:
    judge = truth.Truth({"a": ZH, "b": ZH + "另外一句話在這裏。", "c": EN})
    assert judge("a", "b") == judge("b", "a")
    assert 0.5 < judge("a", "b") < 1.0
    assert judge("a", "c") == 0.0
