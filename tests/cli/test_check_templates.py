"""A site template shared by unrelated stories never makes them copies, and a copy that carries
the template on one side or both is still found (`newsdedup check`, real articles)."""

from __future__ import annotations

from pathlib import Path
from random import Random

from checking import corpus, run_check
from page_templates import LEAKED_CSS

from consumer.evaluation.edits import EditKind, Script, Text, apply_edit


def templated(article: dict) -> dict:
    return {**article, "content": LEAKED_CSS + article["content"]}


def test_a_style_block_shared_by_200_unrelated_articles_flags_none(tmp_path: Path) -> None:
    articles = corpus("zh_hkcnews_2017_2022", 500)
    # Unrelated: none of them flagged, so no pair among them is a copy by check's own measure.
    plain = run_check(tmp_path, articles)
    unrelated = [a for a, d in zip(articles, plain, strict=True) if d["decision"] == "unique"]
    assert len(unrelated) >= 200
    decisions = run_check(tmp_path, [templated(a) for a in unrelated[:200]])
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_a_copy_carrying_the_template_on_either_side_is_found(tmp_path: Path) -> None:
    originals = corpus("zh_hkcnews_2017_2022", 60)
    rng = Random(5)
    kinds = [EditKind.TRUNCATION, EditKind.BOILERPLATE, EditKind.DROPPED_SENTENCES]
    feed = []
    for i, a in enumerate(originals):
        edit = apply_edit(
            kinds[i % 3], Text(a["title"], a["content"]), Script.TRADITIONAL, rng, Text("", "")
        )
        copy = {**a, "id": f"copy-{i}", "title": edit.text.title, "content": edit.text.content}
        # The template on the copy alone, on the original alone, or on both.
        where = i % 3
        feed += [
            templated(a) if where in (1, 2) else a,
            templated(copy) if where in (0, 2) else copy,
        ]
    decisions = {d["id"]: d for d in run_check(tmp_path, feed)}
    missed = [f"copy-{i}" for i in range(60) if decisions[f"copy-{i}"]["decision"] == "unique"]
    assert missed == []
