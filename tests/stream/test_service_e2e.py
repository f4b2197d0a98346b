"""`newsdedup run` end to end against the real broker and real RocksDB: real articles in,
one decision each out, duplicates found, bad input dead-lettered, restarts idempotent."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import jsonschema
import opencc
import pytest
from feeds import real_articles, records_by_id
from service_support import ServiceProcess, Topics, committed_offsets, produce, read_all

pytestmark = pytest.mark.kafka

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "config/schemas/decision.schema.json").read_text()
)


@pytest.fixture
def topics(new_topic) -> Topics:
    return Topics(new_topic("in"), new_topic("out"), new_topic("dlq"))


def with_edited_copies(articles: list[dict]) -> tuple[list[dict], dict[str, str], dict[str, str]]:
    """The feed: originals, then verbatim reposts and lightly edited copies of some of them,
    published an hour later. Returns the feed and {copy id: original id} for both kinds."""
    to_traditional = opencc.OpenCC("s2t")
    exact, near = {}, {}
    copies = []
    for i, a in enumerate(articles):
        if i % 7 == 0:
            copy = {**a, "id": f"repost-{a['id']}"}
            exact[copy["id"]] = a["id"]
        elif i % 7 == 1:
            copy = {
                **a,
                "id": f"edited-{a['id']}",
                "content": a["content"] + "\n（本文来源：示例晚报，编辑：测试）",
            }
            near[copy["id"]] = a["id"]
        elif i % 7 == 2:
            copy = {
                **a,
                "id": f"trad-{a['id']}",
                "title": to_traditional.convert(a["title"]),
                "content": to_traditional.convert(a["content"]),
            }
            exact[copy["id"]] = a["id"]
        else:
            continue
        copies.append(copy)
    return articles + copies, exact, near


def test_real_articles_one_decision_each_duplicates_found(kafka_bootstrap, topics, tmp_path):
    feed, exact, near = with_edited_copies(real_articles("zh_cctv_xwlb_2022_2026.jsonl.gz", 1500))
    produce(kafka_bootstrap, topics.input, feed)
    with ServiceProcess(
        kafka_bootstrap, topics, tmp_path / "state", tmp_path / "svc.log", group_id="e2e"
    ) as service:
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(feed), timeout=240, service=service
        )
        assert service.stop() == 0
    by_id = records_by_id(records)
    assert set(by_id) == {a["id"] for a in feed}
    assert all(len(v) == 1 for v in by_id.values()), "an article was decided twice"
    decided = {k: v[0] for k, v in by_id.items()}
    for d in decided.values():
        jsonschema.validate(d, SCHEMA)
        if d["decision"] != "unique":
            # A member joins the cluster of the article it matched.
            assert d["cluster_id"] == decided[d["matched_id"]]["cluster_id"]
            assert d["matched_id"] != d["id"]
        else:
            assert d["cluster_id"] == d["id"]
    for copy_id, original_id in exact.items():
        d = decided[copy_id]
        if copy_id.startswith("repost-"):
            assert d["decision"] == "duplicate", (copy_id, d)
            assert d["matched_id"] == original_id
    # Script conversion is not perfectly reversible (s2t then t2s changes a few characters),
    # and a boilerplate line moves some fingerprints beyond k = 3; the accuracy issue raises
    # these floors. What the service must never do is lose, double or mis-cluster them.
    trad = [c for c in exact if c.startswith("trad-")]
    assert same_cluster_share(decided, {c: exact[c] for c in trad}) >= 0.98
    assert sum(decided[c]["decision"] == "duplicate" for c in trad) / len(trad) >= 0.95
    assert same_cluster_share(decided, near) >= 0.7


def same_cluster_share(decided: dict[str, dict], pairs: dict[str, str]) -> float:
    found = sum(decided[c]["cluster_id"] == decided[o]["cluster_id"] for c, o in pairs.items())
    return found / len(pairs)


def test_bad_input_goes_to_the_dlq_with_headers(kafka_bootstrap, topics, tmp_path):
    bad = {
        "not_utf8": b'{"id": "x", "title": "\xff\xfe"}',
        "not_json": b"{this is not json",
        "not_object": b'["a", "list"]',
        "missing_id": b'{"title": "no id here"}',
        "bad_field_type": b'{"id": "x", "title": 42}',
        "empty_text": b'{"id": "x", "title": "  ", "content": ""}',
        "bad_published_at": b'{"id": "x", "title": "t", "published_at": "last tuesday"}',
        "too_large": json.dumps({"id": "big", "content": "x" * 200_000}).encode(),
    }
    good = [
        {
            "id": f"good-{i}",
            "title": f"Valid article number {i}",
            "content": f"Body text {i} about harbour cranes and weather in district {i}.",
        }
        for i in range(len(bad) + 1)
    ]
    values: list = []
    for g, b in zip(good, bad.values(), strict=False):
        values += [g, b]
    values.append(good[-1])
    produce(kafka_bootstrap, topics.input, values)
    # The size limit is set below the broker's own 1 MB so that an oversize message can be sent.
    with ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id="dlq",
        input_max_message_bytes="100000",
    ) as service:
        dead = read_all(
            kafka_bootstrap, topics.dlq, expected=len(bad), timeout=120, service=service
        )
        decided = read_all(kafka_bootstrap, topics.output, expected=len(good), timeout=60)
        assert service.stop() == 0
    assert sorted(d.json()["id"] for d in decided) == sorted(g["id"] for g in good)
    assert len(dead) == len(bad)
    by_reason = {r.headers["x-error-reason"].decode(): r for r in dead}
    assert set(by_reason) == set(bad)
    for reason, record in by_reason.items():
        assert record.value == bad[reason], reason
        assert record.headers["x-error-detail"]
        assert record.headers["x-source-topic"] == topics.input.encode()
        assert record.headers["x-source-partition"] == b"0"
        assert int(record.headers["x-source-offset"]) == values.index(bad[reason])
    # Every message was accounted for, so the group committed past all of them.
    assert committed_offsets(kafka_bootstrap, "dlq", topics.input, 1) == [len(values)]


def test_redelivery_is_idempotent_and_updates_replace(kafka_bootstrap, topics, tmp_path):
    original = {
        "id": "a",
        "title": "港口新码头今日启用",
        "content": "新码头设计年吞吐量为两百万标准箱，" * 8,
    }
    other = {
        "id": "b",
        "title": "Rain expected over the weekend",
        "content": "Forecasters expect heavy rain on Saturday and Sunday across the coast. " * 5,
    }
    produce(kafka_bootstrap, topics.input, [original, other, original])
    updated = {**original, "content": "码头启用仪式因台风推迟至下周举行，具体时间另行通知。" * 6}
    service = ServiceProcess(
        kafka_bootstrap, topics, tmp_path / "state", tmp_path / "svc.log", group_id="idem"
    )
    with service:
        first = read_all(kafka_bootstrap, topics.output, expected=3, timeout=90)
        produce(kafka_bootstrap, topics.input, [updated])
        records = read_all(kafka_bootstrap, topics.output, expected=4, timeout=60)
        assert service.stop() == 0
    assert len(first) == 3
    a1, b, a2, a3 = (r.json() for r in records)
    assert (a1["id"], b["id"], a2["id"], a3["id"]) == ("a", "b", "a", "a")
    # The same id and text again: the identical decision, except for the message it answers.
    assert {**a1, "source": None} == {**a2, "source": None}
    assert a2["source"]["offset"] == 2
    # The update is decided anew and never matches its own earlier version.
    assert a3["content_hash"] != a1["content_hash"]
    assert a3["matched_id"] != "a"
    assert a3["decision"] == "unique" and a3["cluster_id"] == "a"


def test_sigterm_finishes_commits_and_exits_zero_quickly(kafka_bootstrap, topics, tmp_path):
    feed = real_articles("en_reuters21578.jsonl.gz", 400)
    produce(kafka_bootstrap, topics.input, feed)
    service = ServiceProcess(
        kafka_bootstrap, topics, tmp_path / "state", tmp_path / "svc.log", group_id="term"
    )
    with service:
        first = read_all(
            kafka_bootstrap, topics.output, expected=len(feed), timeout=120, settle=0.5
        )
        assert len(first) == len(feed)
        started = time.monotonic()
        service.process.send_signal(signal.SIGTERM)
        assert service.process.wait(timeout=15) == 0
        service.process = None
        assert time.monotonic() - started < 10
    assert committed_offsets(kafka_bootstrap, "term", topics.input, 1) == [len(feed)]
    # A restart has nothing left to do: no decision is emitted twice.
    with ServiceProcess(
        kafka_bootstrap, topics, tmp_path / "state", tmp_path / "svc2.log", group_id="term"
    ) as again:
        time.sleep(8)
        assert again.stop() == 0
    assert len(read_all(kafka_bootstrap, topics.output, expected=len(feed), timeout=30)) == len(
        feed
    )
