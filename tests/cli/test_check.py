"""`newsdedup check` end to end on real articles: one decision per line, edited copies found,
candidates verified, short texts matched only by their letters."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from random import Random

import mixed_script
import numpy as np
import pytest
from checking import NEWSDEDUP, corpus, run_check, text_of

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.evaluation import truth
from consumer.evaluation.edits import EditKind, Script, Text, apply_edit
from consumer.fingerprint.fingerprinter import Fingerprinter, FingerprintOptions
from consumer.fingerprint.shingles import bottom_jaccard
from consumer.fingerprint.sketch import estimate


def test_edited_copies_are_found_and_every_flag_is_right(tmp_path: Path) -> None:
    originals = corpus("zh_hkcnews_2017_2022", 120)
    rng = Random(3)
    kinds = [EditKind.TRUNCATION, EditKind.BOILERPLATE, EditKind.DROPPED_SENTENCES]
    copies = []
    for i, a in enumerate(originals[:60]):
        kind = kinds[i % len(kinds)]
        edit = apply_edit(
            kind, Text(a["title"], a["content"]), Script.TRADITIONAL, rng, Text("", "")
        )
        copies.append(
            {**a, "id": f"copy-{i}", "title": edit.text.title, "content": edit.text.content}
        )
    # Each copy right after its original: a repost within the window.
    feed = [x for pair in zip(originals, copies, strict=False) for x in pair]
    feed += originals[len(copies) :]
    decisions = run_check(tmp_path, feed)

    assert [d["id"] for d in decisions] == [a["id"] for a in feed]
    by_id = {a["id"]: a for a in feed}
    flagged = [d for d in decisions if d["decision"] != "unique"]
    for d in flagged:
        assert truth.similarity(text_of(by_id[d["id"]]), text_of(by_id[d["matched_id"]])) >= 0.5
    found = sum(d["decision"] != "unique" for d in decisions if d["id"].startswith("copy-"))
    assert found >= 0.95 * len(copies)


def _close_but_different_pair(articles: list[dict]) -> tuple[dict, dict]:
    """Two real articles within 12 bits whose texts share little: what verification is for."""
    fingerprinter = Fingerprinter(FingerprintOptions(max_terms=None))
    prints = fingerprinter.fingerprint_many([(a["title"], a["content"]) for a in articles])
    simhashes = np.array([p.simhash for p in prints], dtype=np.uint64)
    for i in range(1, len(articles)):
        distances = np.bitwise_count(simhashes[:i] ^ simhashes[i])
        for j in np.flatnonzero((distances >= 4) & (distances <= 12)):
            if truth.similarity(text_of(articles[i]), text_of(articles[int(j)])) < 0.3:
                return articles[int(j)], articles[i]
    pytest.fail("no close pair of different articles in the sample")


def test_candidates_that_share_little_text_are_not_duplicates(tmp_path: Path) -> None:
    # The CCTV corpus is full of formulaic items about different events.
    earlier, later = _close_but_different_pair(corpus("zh_cctv_xwlb_2022_2026", 1500, 200))
    pair = [earlier, {**later, "published_at": earlier["published_at"]}]
    verified = run_check(tmp_path, pair)
    assert verified[1]["decision"] == "unique"
    # The same pair without verification: plain SimHash at k = 12 flags it. This is what
    # makes the assertion above mean something.
    unverified = run_check(tmp_path, pair, NEWSDEDUP_MATCH_MIN_JACCARD="0")
    assert unverified[1]["decision"] == "near_duplicate"


def test_short_texts_match_only_the_same_letters_and_digits(tmp_path: Path) -> None:
    when = "2026-11-22T10:00:00+08:00"
    feed = [
        {
            "id": "h1",
            "title": "国务院召开常务会议 部署稳就业工作",
            "content": "",
            "published_at": when,
        },
        {
            "id": "h2",
            "title": "国务院召开常务会议 部署稳外贸工作",
            "content": "",
            "published_at": when,
        },
        {
            "id": "h3",
            "title": "国务院召开常务会议　部署稳就业工作",
            "content": "",
            "published_at": when,
        },
        # Other punctuation, and a template's leftover braces: the same letters and digits.
        {
            "id": "h4",
            "title": "国务院召开常务会议，部署稳就业工作。",
            "content": "",
            "published_at": when,
        },
        {
            "id": "h5",
            "title": "国务院召开常务会议 部署稳就业工作",
            "content": "{{}}",
            "published_at": when,
        },
        # The last character changed: one 5-gram apart, which a sketch can miss, a key cannot.
        {
            "id": "h6",
            "title": "国务院召开常务会议 部署稳就业工程",
            "content": "",
            "published_at": when,
        },
    ]
    decisions = {d["id"]: d for d in run_check(tmp_path, feed)}
    assert decisions["h2"]["decision"] == "unique"
    assert decisions["h3"]["decision"] == "duplicate"
    assert decisions["h3"]["matched_id"] == "h1"
    for variant in ("h4", "h5"):
        assert decisions[variant]["decision"] == "near_duplicate", decisions[variant]
        assert decisions[variant]["matched_id"] == "h1"
    assert decisions["h6"]["decision"] == "unique"


def test_a_mixed_script_article_matches_its_copy_shingled_the_other_way(tmp_path: Path) -> None:
    # A Chinese report quoting English, and a copy with less of the English: word-shingled and
    # character-shingled, farther apart than the 3 bits accepted unverified, so only the
    # original's character sketch can verify the pair.
    fingerprinter = Fingerprinter()
    original = fingerprinter.fingerprint("", mixed_script.ORIGINAL)
    copy = fingerprinter.fingerprint("", mixed_script.COPY)
    assert 3 < (original.simhash ^ copy.simhash).bit_count() <= 12
    when = "2026-11-22T10:00:00+08:00"
    feed = [
        {"id": "original", "title": "", "content": mixed_script.ORIGINAL, "published_at": when},
        {"id": "copy", "title": "", "content": mixed_script.COPY, "published_at": when},
    ]
    decision = run_check(tmp_path, feed)[1]
    assert (decision["decision"], decision["matched_id"]) == ("near_duplicate", "original")


def test_an_english_story_and_its_repost_under_a_chinese_sites_template_are_copies(
    tmp_path: Path,
) -> None:
    # The repost is shingled by characters for its template's Chinese letters, the story by
    # words: the repost's second sketch, of its words, compares them.
    story = next(a for a in corpus("en_reuters21578", 200, min_chars=1200))
    header = (
        "首页 | 要闻 | 时政 | 财经 | 社会 | 国际 | 英文频道 江畔日报客户端 "
        "字号：大 中 小 分享到：微信 朋友圈 微博"
    )
    repost = {**story, "id": "repost", "content": header + "\n" + story["content"]}
    decisions = {d["id"]: d for d in run_check(tmp_path, [story, repost])}
    assert (decisions["repost"]["decision"], decisions["repost"]["matched_id"]) == (
        "near_duplicate",
        story["id"],
    )


def test_sentences_compared_across_shinglings_need_sentence_min_jaccard(tmp_path: Path) -> None:
    # One sentence quoting English (word-shingled, of mixed script), then one that keeps the
    # quote's first half and goes on in Chinese about something else (character-shingled):
    # estimated at 0.625 by characters, enough for min_jaccard but not for a sentence.
    opening = "位于埃尔蒙特的运输工会联合理事会主席桑坦格罗周二在记者会上表示，"
    quote = "the strike really hurt the company and the drivers"
    when = "2026-11-22T10:00:00+08:00"
    feed = [
        {
            "id": "a",
            "title": "",
            "content": f"{opening}{quote}, we expect the talks to resume on Monday morning.",
            "published_at": when,
        },
        {
            "id": "b",
            "title": "",
            "content": f"{opening}{quote}。工会成员将于周末投票决定是否接受新合同。",
            "published_at": when,
        },
    ]
    assert run_check(tmp_path, feed)[1]["decision"] == "unique"
    loose = run_check(tmp_path, feed, NEWSDEDUP_MATCH_SENTENCE_CHARS="0")[1]
    assert (loose["decision"], loose["matched_id"]) == ("near_duplicate", "a")


def test_a_replay_of_history_keeps_only_the_window(tmp_path: Path) -> None:
    # A year of dated news, a day apart: the watermark carries each day out of the 72 h
    # window, so the state directory must end with the last few days only, as the live
    # service's would (check used to keep every segment and column family it ever made).
    articles = corpus("zh_hkcnews_2017_2022", 120)
    for day, a in enumerate(articles):
        a["published_at"] = (
            np.datetime64("2025-01-01T10:00:00") + np.timedelta64(3 * day, "D")
        ).astype(str) + "Z"
    decisions = run_check(tmp_path, articles)
    assert [d["id"] for d in decisions] == [a["id"] for a in articles]
    state = next(tmp_path.glob("state-*"))
    stats = subprocess.run(
        [*NEWSDEDUP, "index", "stats", "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    info = json.loads(stats.stdout)
    assert info["articles"] <= 2, info
    assert len(info["segments"]) <= 2, info


def _far_truncated_copy(articles: list[dict]) -> tuple[dict, dict, int]:
    """A real article and a truncated copy of it more than 12 bits away that share at least
    60 % of their shingles (sketch estimate and shingle hashes both): the pairs
    `max_distance = 12` leaves out of SimHash's reach."""
    fingerprinter = Fingerprinter()
    for a in articles:
        for share in (0.5, 0.6, 0.7, 0.8):
            copy = {
                **a,
                "id": f"{a['id']}-cut",
                "content": a["content"][: int(len(a["content"]) * share)],
            }
            fa, fc = fingerprinter.fingerprint_many([(x["title"], x["content"]) for x in (a, copy)])
            distance = (fa.simhash ^ fc.simhash).bit_count()
            similarity = estimate(fa.sketch, fc.sketch)
            measured = bottom_jaccard(fa.shingles, fc.shingles)
            if 13 <= distance <= 16 and min(similarity or 0, measured or 0) >= 0.6:
                return a, copy, distance
    pytest.fail("no truncated copy 13-16 bits from its original in the sample")


def test_candidates_past_far_distance_need_far_min_jaccard(tmp_path: Path) -> None:
    original, copy, distance = _far_truncated_copy(corpus("zh_hkcnews_2017_2022", 400))
    feed = [original, copy]
    simhash_only = {"NEWSDEDUP_MATCH_BAND_CANDIDATES": "0"}
    assert run_check(tmp_path, feed, **simhash_only)[1]["decision"] == "unique"  # k = 12
    wide = {**simhash_only, "NEWSDEDUP_INDEX_MAX_DISTANCE": "16"}
    found = run_check(tmp_path, feed, **wide)[1]
    assert (found["decision"], found["matched_id"], found["distance"]) == (
        "near_duplicate",
        original["id"],
        distance,
    )
    # The same candidate, asked for more than its estimate past 12 bits: refused; within
    # far_distance, min_jaccard applies instead.
    strict = {**wide, "NEWSDEDUP_MATCH_FAR_MIN_JACCARD": "1"}
    assert run_check(tmp_path, feed, **strict)[1]["decision"] == "unique"
    near = {**strict, "NEWSDEDUP_MATCH_FAR_DISTANCE": str(distance)}
    assert run_check(tmp_path, feed, **near)[1]["decision"] == "near_duplicate"


def test_a_copy_out_of_simhash_reach_is_found_by_its_band_keys(tmp_path: Path) -> None:
    """The same truncated copy at the defaults: the band keys find it, verified from the
    shingle hashes on disk, and its decision names the true distance, beyond k."""
    original, copy, distance = _far_truncated_copy(corpus("zh_hkcnews_2017_2022", 400))
    found = run_check(tmp_path, [original, copy])[1]
    assert (found["decision"], found["matched_id"], found["distance"]) == (
        "near_duplicate",
        original["id"],
        distance,
    )
    assert distance > 12
    # Asked for more than the two share, the shingle hashes refuse it.
    strict = run_check(tmp_path, [original, copy], NEWSDEDUP_MATCH_MIN_JACCARD="0.99")[1]
    assert strict["decision"] == "unique"


def _reworded_sentence_pair() -> tuple[dict, dict, float]:
    """Two MSRP sentences labelled different news, within 12 bits, whose sketches estimate
    between `min_jaccard` and `sentence_min_jaccard`: a rewording with other facts."""
    fingerprinter = Fingerprinter()
    for pair in iter_jsonl(shared_data_dir() / "pairs" / "msrp_en.jsonl.gz"):
        if pair["label"] != 0 or not all(80 <= len(pair[x]) < 200 for x in "ab"):
            continue
        fa, fb = fingerprinter.fingerprint_many([("", pair["a"]), ("", pair["b"])])
        similarity = estimate(fa.sketch, fb.sketch)
        if (fa.simhash ^ fb.simhash).bit_count() <= 12 and similarity and 0.55 <= similarity < 0.7:
            when = "2026-11-22T10:00:00Z"
            a = {"id": "a", "title": "", "content": pair["a"], "published_at": when}
            b = {"id": "b", "title": "", "content": pair["b"], "published_at": when}
            return a, b, similarity
    pytest.fail("no reworded pair in MSRP")


def test_latin_sentences_need_sentence_min_jaccard(tmp_path: Path) -> None:
    a, b, _ = _reworded_sentence_pair()
    assert run_check(tmp_path, [a, b])[1]["decision"] == "unique"
    # Without the sentence rule, min_jaccard alone accepts it: the rule is what refuses it.
    loose = run_check(tmp_path, [a, b], NEWSDEDUP_MATCH_SENTENCE_CHARS="0")[1]
    assert (loose["decision"], loose["matched_id"]) == ("near_duplicate", "a")
