"""Edit generators: every kind keeps a plausible similarity to its original, deterministically.

Run on real articles from `../shared/data` (read at run time, never copied) and on synthetic
text, so a generator that silently does nothing or destroys the article is caught.
"""

from __future__ import annotations

from random import Random

import pytest

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.evaluation import truth
from consumer.evaluation.edits import (
    EditKind,
    Script,
    Text,
    applicable_kinds,
    apply_edit,
    detect_script,
    split_sentences,
)
from consumer.evaluation.feed import MIN_SHINGLES_TO_EDIT

CORPORA = {
    "zh_hkcnews_2017_2022.jsonl.gz": Script.TRADITIONAL,
    "zh_cctv_xwlb_2022_2026.jsonl.gz": Script.SIMPLIFIED,
    "en_reuters21578.jsonl.gz": Script.LATIN,
}

# Jaccard (truth) of an edited copy to its original, for articles long enough to be edited.
PLAUSIBLE: dict[EditKind, tuple[float, float]] = {
    EditKind.BOILERPLATE: (0.6, 0.99),
    EditKind.HTML: (0.9, 1.0),
    EditKind.PUNCTUATION: (0.98, 1.0),
    EditKind.TRUNCATION: (0.55, 0.97),
    EditKind.DROPPED_SENTENCES: (0.6, 0.99),
    EditKind.SWAPPED_SENTENCES: (0.8, 1.0),
    EditKind.TYPOS: (0.75, 0.995),
    EditKind.RETITLED: (0.75, 0.999),
    EditKind.INSERTED_SENTENCE: (0.6, 0.99),
    EditKind.SCRIPT_CONVERSION: (0.9, 1.0),
    EditKind.WIRE_CORRECTION: (0.75, 0.99),
    EditKind.MIXED: (0.45, 1.0),
}


def _articles(name: str, n: int) -> list[Text]:
    """The first `n` articles of a corpus long enough to be edited."""
    out = []
    for record in iter_jsonl(shared_data_dir() / name, limit=3000):
        text = Text(record.get("title") or "", record.get("content") or "")
        whole = truth.article_text(text.title, text.content)
        if len(truth.shingles(whole)) >= MIN_SHINGLES_TO_EDIT:
            out.append(text)
            if len(out) == n:
                break
    return out


@pytest.fixture(scope="module", params=sorted(CORPORA))
def corpus(request: pytest.FixtureRequest) -> tuple[Script, list[Text]]:
    return CORPORA[request.param], _articles(request.param, 12)


def test_script_is_detected(corpus: tuple[Script, list[Text]]) -> None:
    script, articles = corpus
    assert [detect_script(a.title + a.content) for a in articles] == [script] * len(articles)


def test_every_kind_gives_a_plausible_near_duplicate(corpus: tuple[Script, list[Text]]) -> None:
    script, articles = corpus
    for kind in applicable_kinds(script):
        low, high = PLAUSIBLE[kind]
        similarities = []
        for i, original in enumerate(articles):
            donor = articles[(i + 1) % len(articles)]
            edit = apply_edit(kind, original, script, Random(i), donor)
            assert edit.kind is kind
            assert edit.text != original, f"{kind} changed nothing"
            similarities.append(
                truth.similarity(
                    truth.article_text(original.title, original.content),
                    truth.article_text(edit.text.title, edit.text.content),
                )
            )
        # Most copies in the plausible range: a rare article (one paragraph, no numbers) may not be.
        inside = sum(low <= s <= high for s in similarities)
        assert inside >= len(similarities) - 1, f"{kind}: {sorted(similarities)}"


def test_edits_are_deterministic_for_a_seed(corpus: tuple[Script, list[Text]]) -> None:
    script, articles = corpus
    original, donor = articles[0], articles[1]
    differs = 0
    for kind in applicable_kinds(script):
        first = apply_edit(kind, original, script, Random(7), donor)
        assert apply_edit(kind, original, script, Random(7), donor) == first
        differs += apply_edit(kind, original, script, Random(8), donor) != first
    assert differs >= 5  # the random kinds depend on the seed


def test_kinds_per_script() -> None:
    assert EditKind.WIRE_CORRECTION in applicable_kinds(Script.LATIN)
    assert EditKind.SCRIPT_CONVERSION not in applicable_kinds(Script.LATIN)
    assert EditKind.SCRIPT_CONVERSION in applicable_kinds(Script.TRADITIONAL)
    assert EditKind.WIRE_CORRECTION not in applicable_kinds(Script.SIMPLIFIED)


def test_sentence_split_keeps_every_character() -> None:
    zh = "第一句。第二句！「引述。」\n\n第三段？"
    assert split_sentences(zh, Script.SIMPLIFIED) == [
        "第一句。",
        "第二句！",
        "「引述。」\n\n",
        "第三段？",
    ]
    en = 'Profit rose 1.5 pct. "We are pleased," he said.\n    Shares fell.'
    pieces = split_sentences(en, Script.LATIN)
    assert "".join(pieces) == en
    assert len(pieces) == 3


def test_script_conversion_goes_both_ways() -> None:
    trad = Text("歷史", "這是一個關於經濟發展的報導。")
    simp = apply_edit(EditKind.SCRIPT_CONVERSION, trad, Script.TRADITIONAL, Random(0), trad)
    assert simp.text == Text("历史", "这是一个关于经济发展的报导。")
    back = apply_edit(EditKind.SCRIPT_CONVERSION, simp.text, Script.SIMPLIFIED, Random(0), trad)
    assert back.text == trad


def test_typos_never_pick_a_letter_past_the_end_of_a_shortened_text():
    # Typos go from the end backwards: a deletion shortens the text, and a later substitution
    # once picked its letter by a position counted in the text before it (an IndexError for
    # `eval --seed 9` on 3,000 Reuters articles).
    from consumer.evaluation.edits import _typos

    text = Text("t", "abcdefghij" * 100)  # 4 typos each
    for seed in (2703, 6839, 7368, 9735, 11345):  # those that picked one, among 20,000
        edited, _ = _typos(text, Script.LATIN, Random(seed))
        assert abs(len(edited.content) - len(text.content)) <= 4
