"""Scale-out against the real broker: `run --role fingerprint` and `run --role decide` processes
on a 6-partition feed find every planted cross-partition duplicate, decide each article once
under exactly_once, a decide owner killed with its disk lost is replaced by one that restores
the index from the changelog and misses nothing an uninterrupted run finds, and a restoring
instance says so in /readyz and its metrics."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from feeds import real_articles, records_by_id
from roles import RoleProcess, scaleout_options
from service_support import Topics, produce, read_all, wait_until

from benchmarks.scaleout import _produce_changes
from consumer.config import FingerprintConfig, IndexConfig, InputConfig
from consumer.records import Message, Source
from consumer.scaleout.wire import domain_partition
from consumer.stream.pipeline import Pipeline
from consumer.stream.state import open_index
from consumer.stream.workers import Analyzer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

FEED_PARTITIONS = 6
SUFFIX = "\n（本文来源：示例晚报，编辑：测试）"


@pytest.fixture
def topics(new_topic) -> Topics:
    return Topics(new_topic("in", FEED_PARTITIONS), new_topic("out"), new_topic("dlq"))


def copies_of(originals: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """A verbatim repost or an edited copy of every second original: {copy id: original id}."""
    copies, planted = [], {}
    for i, a in enumerate(originals[::2]):
        if i % 2:
            copy = {**a, "id": f"repost-{a['id']}"}
        else:
            copy = {**a, "id": f"edited-{a['id']}", "content": a["content"] + SUFFIX}
        copies.append(copy)
        planted[copy["id"]] = a["id"]
    return copies, planted


def produce_spread(
    bootstrap: str, topic: str, articles: list[dict], planted: dict[str, str] | None = None
) -> None:
    """Originals spread over the feed partitions by id; a copy three partitions away from its
    original, so no copy shares its original's partition."""
    for p in range(FEED_PARTITIONS):
        mine = [a for a in articles if feed_partition(a["id"], planted or {}) == p]
        produce(bootstrap, topic, mine, partition=p)


def feed_partition(article_id: str, planted: dict[str, str]) -> int:
    if article_id in planted:
        return (feed_partition(planted[article_id], {}) + 3) % FEED_PARTITIONS
    return int(article_id.encode().hex(), 16) % FEED_PARTITIONS


def reference_decisions(feed: list[dict], domain_field: str) -> dict[str, dict]:
    """What one uninterrupted single-process pipeline decides for `feed`, in this order, with
    one index per domain (the article field `domain_field`; "" = one domain)."""
    out: dict[str, dict] = {}
    index = IndexConfig(retention="36500d", segment="30d")
    with Analyzer(InputConfig(), FingerprintConfig(), workers=None) as analyzer:
        by_domain: dict[str, list[dict]] = {}
        for a in feed:
            by_domain.setdefault(str(a.get(domain_field, "")) if domain_field else "", []).append(a)
        for n, articles in enumerate(by_domain.values()):
            path = Path(f"/tmp/newsdedup-reference-{uuid.uuid4().hex}-{n}")
            try:
                with open_index(index, str(path)) as store:
                    pipeline = Pipeline(store, analyzer)
                    messages = [
                        Message(None, _json(a), Source("ref", 0, i), 0)
                        for i, a in enumerate(articles)
                    ]
                    decided = pipeline.decide(messages)
                    decided.index_batch.commit()
                    for d in decided.decisions:
                        out[d.id] = d.to_dict()
            finally:
                shutil.rmtree(path, ignore_errors=True)
    return out


def _json(article: dict) -> bytes:
    return json.dumps(article, ensure_ascii=False).encode()


def decided_once(records) -> dict[str, dict]:
    by_id = records_by_id(records)
    doubled = {k: len(v) for k, v in by_id.items() if len(v) != 1}
    assert not doubled, f"articles decided more than once: {doubled}"
    return {k: v[0] for k, v in by_id.items()}


def test_three_fingerprint_and_three_decide_instances_find_every_cross_partition_duplicate(
    kafka_bootstrap, topics, tmp_path
):
    tenants = _tenants_on_distinct_partitions(3)
    originals = real_articles("zh_cctv_xwlb_2022_2026.jsonl.gz", 240)
    for i, a in enumerate(originals):
        a["tenant"] = tenants[i % 3]
    copies, planted = copies_of(originals)
    # A verbatim copy under another tenant: a different domain, so never its duplicate.
    # Verbatim copies under the next tenant: another domain, so never a duplicate of theirs.
    strangers = {}
    for a in originals[1:30:4]:
        other = tenants[(tenants.index(a["tenant"]) + 1) % 3]
        copies.append({**a, "id": f"stranger-{a['id']}", "tenant": other})
        strangers[f"stranger-{a['id']}"] = a["id"]
    placed = {**planted, **strangers}
    options = scaleout_options(scaleout_domain_field="tenant")
    common = dict(group_id=f"so-{uuid.uuid4().hex[:6]}", delivery="exactly_once", **options)
    instances = [
        RoleProcess(
            role,
            kafka_bootstrap,
            topics,
            tmp_path / f"{role}-{n}",
            tmp_path / f"{role}-{n}.log",
            scaleout_instance_id=f"{role}-{n}",
            **common,
        )
        for role in ("fingerprint", "decide")
        for n in range(3)
    ]
    try:
        for instance in instances:
            instance.start()
        produce_spread(kafka_bootstrap, topics.input, originals)
        first = read_all(kafka_bootstrap, topics.output, expected=len(originals), timeout=180)
        assert len(first) >= len(originals)
        produce_spread(kafka_bootstrap, topics.input, copies, placed)
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(originals) + len(copies), timeout=180
        )
        for instance in instances:
            assert instance.stop() == 0, instance.log()[-2000:]
    finally:
        for instance in instances:
            if instance.process is not None:
                instance.kill()
    decided = decided_once(records)
    assert set(decided) == {a["id"] for a in originals + copies}
    tenant_of = {a["id"]: a["tenant"] for a in originals + copies}
    for d in decided.values():
        if d["matched_id"] is not None:
            assert tenant_of[d["matched_id"]] == tenant_of[d["id"]], "matched across domains"
    reference = reference_decisions(originals + copies, "tenant")
    for copy_id, original_id in planted.items():
        assert (
            decided[original_id]["source"]["partition"] != decided[copy_id]["source"]["partition"]
        )
        if copy_id.startswith("repost-"):
            assert decided[copy_id]["decision"] == "duplicate", decided[copy_id]
            assert decided[copy_id]["matched_id"] == original_id
        if reference[copy_id]["decision"] != "unique":
            assert decided[copy_id]["cluster_id"] == decided[original_id]["cluster_id"], copy_id
    for stranger_id in strangers:
        matched = decided[stranger_id]["matched_id"]
        assert matched is None or tenant_of[matched] == tenant_of[stranger_id]
    # The decide instances shared the domains: more than one of them wrote an index.
    writers = [p for p in tmp_path.glob("decide-*/partition-*/domain=*") if any(p.iterdir())]
    assert len({p.parent.parent for p in writers}) >= 2, writers


def _tenants_on_distinct_partitions(n: int) -> list[str]:
    names: dict[int, str] = {}
    i = 0
    while len(names) < n:
        names.setdefault(domain_partition(f"tenant-{i}", FEED_PARTITIONS), f"tenant-{i}")
        i += 1
    return list(names.values())


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_killed_decide_owner_with_lost_disk_is_replaced_from_the_changelog(
    kafka_bootstrap, topics, tmp_path, delivery
):
    originals = real_articles("zh_cctv_xwlb_2022_2026.jsonl.gz", 200)
    copies, planted = copies_of(originals)
    options = scaleout_options()
    common = dict(group_id=f"fo-{uuid.uuid4().hex[:6]}", delivery=delivery, **options)

    def role(name: str, n: int) -> RoleProcess:
        return RoleProcess(
            name,
            kafka_bootstrap,
            topics,
            tmp_path / f"{name}-{n}",
            tmp_path / f"{name}-{n}.log",
            scaleout_instance_id=f"{name}-{n}",
            **common,
        )

    fingerprint, deciders = role("fingerprint", 0), [role("decide", 0), role("decide", 1)]
    partition = domain_partition("", 6)
    try:
        for p in (fingerprint, *deciders):
            p.start()
        # Both deciders in the group before any work, so the owner found below stays the owner.
        wait_until(lambda: all(_ready(d) for d in deciders), 120, what="both deciders")
        produce_spread(kafka_bootstrap, topics.input, originals)
        read_all(kafka_bootstrap, topics.output, expected=len(originals), timeout=180)
        owner = next(d for d in deciders if _owns(d, partition))
        survivor = next(d for d in deciders if d is not owner)
        # Half the copies in flight when the owner dies: some batches are mid-way.
        half = len(copies) // 2
        produce_spread(kafka_bootstrap, topics.input, copies[:half], planted)
        owner.kill()
        shutil.rmtree(owner.env["NEWSDEDUP_INDEX_PATH"])
        produce_spread(kafka_bootstrap, topics.input, copies[half:], planted)
        wait_until(lambda: _owns(survivor, partition), 60, what="the survivor to take over")
        records = read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(originals) + len(copies),
            timeout=180,
            service=survivor,
        )
        assert "restore finished" in survivor.log()
        _, metrics = survivor.get("/metrics")
        assert "newsdedup_restore_records_total" in metrics
        for p in (fingerprint, survivor):
            assert p.stop() == 0, p.log()[-2000:]
    finally:
        for p in (fingerprint, *deciders):
            if p.process is not None:
                p.kill()
    if delivery == "exactly_once":
        decided = decided_once(records)
    else:
        # At-least-once may repeat a decision after the kill, but always the same one.
        decided = {}
        for article_id, ds in records_by_id(records).items():
            assert all(_verdict(d) == _verdict(ds[0]) for d in ds), ds
            decided[article_id] = ds[0]
    assert set(decided) == {a["id"] for a in originals + copies}
    reference = reference_decisions(originals + copies, "")
    for copy_id, original_id in planted.items():
        if reference[copy_id]["decision"] != "unique":
            assert decided[copy_id]["decision"] == reference[copy_id]["decision"], copy_id
            assert decided[copy_id]["cluster_id"] == decided[original_id]["cluster_id"], copy_id
        if copy_id.startswith("repost-"):
            assert decided[copy_id]["matched_id"] == original_id


def _ready(process: RoleProcess) -> bool:
    try:
        return process.get("/readyz")[0] == 200
    except OSError:  # not listening yet
        return False


def _verdict(d: dict) -> tuple:
    return (d["decision"], d["cluster_id"], d["matched_id"], d["distance"])


def _owns(process: RoleProcess, partition: int) -> bool:
    """Whether `process` holds `partition` now, from its latest assignment or revocation."""
    latest = None
    for line in process.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") in ("partitions assigned", "partitions revoked"):
            latest = entry
    return (
        latest is not None
        and latest["event"] == "partitions assigned"
        and partition in latest["partitions"]
    )


def test_decide_instance_is_not_ready_while_it_restores(kafka_bootstrap, topics, tmp_path):
    options = scaleout_options()
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    internal, changelog = options["scaleout_internal_topic"], options["scaleout_changelog_topic"]
    for topic in (internal, changelog):
        admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    # Seconds of restoring on this machine (~130,000 records/s since the bulk restore): long
    # enough for the test, polling every 0.2 s, to see it.
    records = 600_000
    _produce_changes(kafka_bootstrap, changelog, records)  # to partition 0, domain ""
    assert domain_partition("", 6) == 0
    decider = RoleProcess(
        "decide",
        kafka_bootstrap,
        topics,
        tmp_path / "decide",
        tmp_path / "decide.log",
        group_id=f"rs-{uuid.uuid4().hex[:6]}",
        scaleout_instance_id="decide-0",
        **options,
    )
    seen_restoring, seen_remaining = False, False
    with decider:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert decider.running(), decider.log()[-3000:]
            try:
                status, body = decider.get("/readyz")
                _, metrics = decider.get("/metrics")
            except OSError:  # not listening yet
                time.sleep(0.2)
                continue
            if status == 503 and "restore" in body:
                seen_restoring = True
                seen_remaining |= any(
                    line.startswith('newsdedup_restore_remaining_records{partition="0"}')
                    and float(line.split()[-1]) > 0
                    for line in metrics.splitlines()
                )
            if status == 200:
                break
            time.sleep(0.2)
        assert status == 200, body
        assert seen_restoring, "never reported not-ready while restoring"
        assert seen_remaining, "restore progress never showed in the metrics"
        finished = [
            json.loads(line)
            for line in decider.log().splitlines()
            if '"restore finished"' in line and '"partition": 0' in line
        ]
        assert finished and finished[-1]["read"] == records
        assert f"newsdedup_restore_records_total {records:.1f}" in decider.get("/metrics")[1]
        assert decider.stop() == 0
