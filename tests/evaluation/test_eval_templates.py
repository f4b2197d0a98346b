"""The templated evaluation feed (`newsdedup eval --templates`): deterministic, honouring its
share, with truth kept on the stories, and template-made flags counted as wrong.

Run on the first articles of real corpora from `../shared/data` (read at run time, never
copied), with a stand-in for `newsdedup check` where the command is needed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from random import Random

import pytest

from consumer import cli
from consumer.corpus import shared_data_dir
from consumer.errors import InputError
from consumer.evaluation import check, truth
from consumer.evaluation.edits import Script
from consumer.evaluation.feed import Feed, build_feed
from consumer.evaluation.metrics import score
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.evaluation.sites import CHINESE_SITES, ENGLISH_SITES
from consumer.evaluation.templates import (
    NO_TEMPLATE,
    OTHER_SITE,
    REPOST_KINDS,
    SAME_SITE,
    apply_templates,
    feed_script,
    sites_for,
)
from consumer.records import DecisionKind

HKCNEWS = "zh_hkcnews_2017_2022.jsonl.gz"
REUTERS = "en_reuters21578.jsonl.gz"


def _corpus(name: str) -> Path:
    path = shared_data_dir() / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path


@pytest.fixture(scope="module")
def plain() -> Feed:
    return build_feed(_corpus(HKCNEWS), limit=300, edits=60, seed=5)


def test_the_same_seed_gives_the_same_feed(plain: Feed) -> None:
    templated = apply_templates(plain, 0.4, seed=1)
    assert apply_templates(plain, 0.4, seed=1) == templated
    assert apply_templates(plain, 0.4, seed=2).articles != templated.articles
    assert apply_templates(plain, 0, seed=1) is plain


def test_the_share_of_corpus_articles_is_honoured(plain: Feed) -> None:
    corpus = [a.id for a in plain.articles if a.origin_id is None]
    for share in (0.1, 0.4, 1.0):
        templated = apply_templates(plain, share, seed=3)
        sites = templated.templates.site
        assert sum(a in sites for a in corpus) == round(share * len(corpus))
    with pytest.raises(InputError, match="between 0 and 1"):
        apply_templates(plain, 1.5, seed=3)


def test_truth_is_that_of_the_untemplated_stories(plain: Feed) -> None:
    templated = apply_templates(plain, 0.5, seed=4)
    assert templated.pairs == plain.pairs
    assert templated.story_texts() == plain.texts()
    pages = templated.texts()
    changed = [i for i, text in plain.texts().items() if pages[i] != text]
    assert sorted(changed) == sorted(templated.templates.site)
    stories = templated.story_texts()
    for pair in templated.pairs:
        assert truth.similarity(stories[pair.earlier], stories[pair.later]) == pair.jaccard


def test_copies_come_as_same_site_cross_site_and_untemplated_reposts(plain: Feed) -> None:
    templated = apply_templates(plain, 1.0, seed=6)
    t = templated.templates
    copies = [a for a in templated.articles if a.origin_id is not None]
    kinds = Counter(t.reposts[c.id] for c in copies)
    assert set(kinds) == set(REPOST_KINDS)
    assert max(kinds.values()) - min(kinds.values()) <= 1  # equal parts
    plain_content = {a.id: a.content for a in plain.articles}
    for c in copies:
        kind = t.reposts[c.id]
        if kind == SAME_SITE:
            assert t.site[c.id] == t.site[c.origin_id]
        elif kind == OTHER_SITE:
            assert t.site[c.id] != t.site[c.origin_id]
        else:
            assert kind == NO_TEMPLATE
            assert c.id not in t.site and c.content == plain_content[c.id]


def test_a_flag_between_unrelated_pages_of_one_site_is_wrong(plain: Feed) -> None:
    templated = apply_templates(plain, 1.0, seed=7)
    site = templated.templates.site
    stories = templated.story_texts()
    corpus = [a.id for a in templated.articles if a.origin_id is None]
    # Two unrelated stories on one site: only their template is shared.
    first, second = next(
        (a, b)
        for a in corpus
        for b in corpus
        if a < b and site[a] == site[b] and truth.similarity(stories[a], stories[b]) < 0.1
    )
    decisions = tuple(
        SystemAnswer(a.id, DecisionKind.NEAR_DUPLICATE, first)
        if a.id == second
        else SystemAnswer(a.id, DecisionKind.UNIQUE)
        for a in templated.articles
    )
    judged = truth.Truth(stories)
    s = score(SystemRun("x", decisions, 1.0), templated.pairs, judged, templated.templated_ids())
    assert (s.flagged, s.correct, s.template_flags) == (1, 0, 1)
    assert score(SystemRun("x", decisions, 1.0), templated.pairs, judged).template_flags is None


def test_a_traditional_feed_gets_its_templates_in_traditional_script(plain: Feed) -> None:
    templated = apply_templates(plain, 1.0, seed=8)
    corpus = [a for a in plain.articles if a.origin_id is None]
    assert feed_script(corpus) is Script.TRADITIONAL
    jiangpan = [a for a in templated.articles if templated.templates.site.get(a.id) == "jiangpan"]
    assert jiangpan and all("江畔日報" in a.content for a in jiangpan)


def test_an_english_feed_gets_english_sites() -> None:
    feed = build_feed(_corpus(REUTERS), limit=200, edits=0)
    templated = apply_templates(feed, 1.0, seed=0)
    keys = {s.key for s in ENGLISH_SITES}
    assert set(templated.templates.site.values()) <= keys
    assert sites_for(Script.LATIN) == ENGLISH_SITES


@pytest.mark.parametrize("script", [Script.SIMPLIFIED, Script.TRADITIONAL, Script.LATIN])
def test_every_template_is_200_to_1500_characters(script: Script) -> None:
    headline = "今日要聞一則測試標題文字" if script is not Script.LATIN else "COCOA PRICES RISE ON"
    titles = [f"{headline} {i}" * 2 for i in range(20)]
    when = datetime(2022, 3, 4, 9, 30, tzinfo=UTC)
    for site in sites_for(script):
        for seed in range(5):
            page = site.render(Random(seed), when, titles)
            assert 200 <= len(page.head) + len(page.tail) <= 1500, site.key
            assert "$" not in page.head + page.tail  # every placeholder filled


def test_some_chinese_sites_lead_with_leaked_css() -> None:
    css_led = [s for s in CHINESE_SITES if s.head and truth.is_latin_script(s.head)]
    assert 1 <= len(css_led) < len(CHINESE_SITES)


# The stand-in: an article whose content begins like an earlier one's (a shared page header)
# is decided its duplicate; so a templated feed draws flags made by templates alone.
FAKE_CHECK = """
import json, sys
args = sys.argv[1:]
src, out = args[0], args[args.index("-o") + 1]
first = {}
with open(src, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
    for line in f:
        a = json.loads(line)
        key = a["content"][:60]
        hit = first.get(key)
        first.setdefault(key, a["id"])
        d = {"id": a["id"], "decision": "near_duplicate" if hit else "unique",
             "matched_id": hit, "cluster_id": hit or a["id"]}
        g.write(json.dumps(d) + "\\n")
"""


@pytest.fixture
def fake_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "fake_check.py"
    script.write_text(FAKE_CHECK, encoding="utf-8")
    monkeypatch.setattr(check, "CHECK_COMMAND", (sys.executable, str(script)))


@pytest.mark.usefixtures("fake_check")
def test_eval_reports_template_flags_for_every_system(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--data", str(_corpus(HKCNEWS)), "--limit", "200", "--edits", "30"]
    argv += ["--baselines", "minhash-verified", "--templates", "0.5", "--json"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    t = report["feed"]["templates"]
    assert t["share"] == 0.5 and t["corpus_templated"] == 100
    assert sum(t["reposts"].values()) == 30
    systems = {s["system"]: s for s in report["systems"]}
    # The stand-in matches page headers: its wrong flags are mostly the template's doing.
    assert 0 < systems["newsdedup"]["template_flags"] <= systems["newsdedup"]["wrongly_flagged"]
    assert systems["minhash-verified"]["template_flags"] is not None

    assert cli.main([*argv[:-1]]) == 0
    text = capsys.readouterr().out
    assert "page templates: 100 corpus articles (50%)" in text
    header = next(ln for ln in text.splitlines() if ln.startswith("system"))
    assert header.split()[5:8] == ["wrong", "tmpl", "missed"]


def test_templates_outside_zero_to_one_are_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--data", str(_corpus(HKCNEWS)), "--templates", "2"]
    assert cli.main(argv) == 2
    assert "--templates" in capsys.readouterr().err
