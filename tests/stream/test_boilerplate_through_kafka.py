"""The boilerplate the service learns is the boilerplate `check` learns: a feed of stories under
one site's footer (a template longer than they are), spread over 3 partitions, decided by the
real service that is killed (SIGKILL) halfway and restarted on its index, is decided exactly as
`check` decides the feed in publish order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from random import Random

import pytest
from page_templates import PORTAL_FOOTER

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.evaluation import check, truth
from consumer.evaluation.edits import EditKind, Script, Text, apply_edit
from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.through_kafka import KafkaOptions, run_through_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def footer_feed(stories: int, copies: int, cut: int | None = None) -> list[FeedArticle]:
    """Short unrelated stories under the footer, one a minute, then copies of some of them (on
    the same site, or without the footer: a repost elsewhere) once the footer is learned. With
    `cut`, the stories are cut to that many characters: then the first of them are copies of
    each other until they have counted the footer."""
    chosen: list[tuple[dict, set[str]]] = []
    path = shared_data_dir() / "zh_hkcnews_2017_2022.jsonl.gz"
    for record in iter_jsonl(path, 20 * stories):
        content = record.get("content") or ""
        if not 300 <= len(content) <= 450:
            continue
        shingles = truth.shingles(truth.article_text(record.get("title") or "", content))
        if all(len(shingles & s) < 0.2 * len(shingles | s) for _, s in chosen):
            chosen.append((record, shingles))
            if len(chosen) == stories:
                break
    feed = [
        FeedArticle(
            r["id"],
            r.get("title") or "",
            r["content"][:cut] + PORTAL_FOOTER,
            START + timedelta(minutes=i),
        )
        for i, (r, _) in enumerate(chosen)
    ]
    rng = Random(4)
    for i, (record, _) in enumerate(chosen[-copies:]):
        edit = apply_edit(
            EditKind.DROPPED_SENTENCES,
            Text(record.get("title") or "", record["content"]),
            Script.TRADITIONAL,
            rng,
            Text("", ""),
        )
        content = edit.text.content + (PORTAL_FOOTER if i % 2 else "")
        when = START + timedelta(minutes=stories + i)
        feed.append(FeedArticle(f"copy-{i}", edit.text.title, content, when))
    return feed


@pytest.mark.parametrize(("role", "cut"), [("all", None), ("scaleout", None), ("all", 250)])
def test_a_killed_service_relearns_the_footer_and_decides_as_check(
    kafka_bootstrap: str, role: str, cut: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small batches, so that the kill at half the feed lands in the middle of the work.
    monkeypatch.setenv("NEWSDEDUP_KAFKA_BATCH_MAX_MESSAGES", "10")
    feed = footer_feed(120, 30, cut)
    checked = check.run_newsdedup_check(feed)
    assert checked.error is None
    served, delivered = run_through_kafka(
        feed, None, KafkaOptions(kafka_bootstrap, partitions=3, role=role, restart="kill")
    )
    assert served.error is None, served.error
    assert 0 < delivered.decided_before_restart < len(feed)
    assert (delivered.decided, delivered.late) == (len(feed), 0)
    answers = {d.id: (d.verdict, d.matched_id, d.cluster_id) for d in checked.decisions}
    assert {d.id: (d.verdict, d.matched_id, d.cluster_id) for d in served.decisions} == answers
    # The footer is learned: none of the stories is a copy of another, or, cut short, only
    # the first few, which learned it by counting their samples though copies.
    stories = [d for d in checked.decisions if not d.id.startswith("copy-")]
    first = {a.id for a in feed[: 0 if cut is None else 5]}
    flagged = {d.id for d in stories if d.flagged}
    assert flagged <= first
    # Cut short, the first pages are copies that count their samples: what the kill must keep.
    assert flagged or cut is None
