"""Faults of the index's disk against a real `newsdedup run` and the real broker: the state
filesystem filling up mid-feed, and a damaged state directory, rebuilt from the feed (the
default role) or restored from the changelog (the decide role)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from feeds import corpus_feed
from roles import RoleProcess, scaleout_options
from service_support import (
    NEWSDEDUP,
    ServiceProcess,
    Topics,
    committed_offsets,
    decisions_by_id,
    produce,
    read_all,
    wait_until,
)

from benchmarks.scaleout import _produce_changes
from consumer.config import IndexConfig
from consumer.deciding import stored
from consumer.stream.state import index_options
from indexstore import IndexStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

FEED_ARTICLES = 3000
# The index's memtables flush every 2 MiB, so a full disk is met by flushes as well as by the
# write-ahead log, and the test does not wait for a large memtable to fill.
INDEX_MEMORY = "16MiB"
# The options ServiceProcess runs with, so opening the index here compares like with like.
OPTIONS = index_options(IndexConfig(segment="30d", retention="36500d", memory=INDEX_MEMORY))


@pytest.fixture
def topics(new_topic) -> Topics:
    return Topics(new_topic("in", partitions=3), new_topic("out", 3), new_topic("dlq"))


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_full_disk_stops_cleanly_and_a_restart_resumes_after_space_returns(
    kafka_bootstrap, topics, tmp_path, small_fs, delivery
):
    feed = corpus_feed(FEED_ARTICLES)
    ids = {a["id"] for a in feed}
    half = len(feed) // 2
    state = small_fs.path / "state"
    group = f"diskfull-{delivery}"
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        state,
        tmp_path / "svc.log",
        group_id=group,
        delivery=delivery,
        index_memory=INDEX_MEMORY,
    )
    produce(kafka_bootstrap, topics.input, feed[:half])
    with service:
        read_all(kafka_bootstrap, topics.output, expected=half, timeout=180, service=service)
        filler = small_fs.fill()
        produce(kafka_bootstrap, topics.input, feed[half:])
        wait_until(lambda: not service.running(), 120, what="the service to stop on the full disk")
        code = service.process.wait()
    log = service.log()
    assert code == 2, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if line.startswith("newsdedup: error:")]
    assert len(errors) == 1 and "its filesystem is full" in errors[0], log[-3000:]
    assert str(state) in errors[0]

    # Nothing committed beyond what the index holds, and nothing published beyond what is
    # committed: every committed offset is at or below the index's own input position.
    with IndexStore.open(state, OPTIONS, read_only=True) as store:
        positions = store.positions()
    committed = committed_offsets(kafka_bootstrap, group, topics.input, 3)
    for partition, offset in enumerate(committed):
        assert offset <= positions.get(f"{topics.input}/{partition}", 0), (committed, positions)
    assert sum(committed) < len(feed), "the full disk was met before the feed's end"
    if delivery == "exactly_once":
        visible = read_all(kafka_bootstrap, topics.output, expected=0, timeout=30, settle=3.0)
        assert len(visible) == sum(committed)

    # Restarted while the disk is still full (closing may have released a little of it):
    # the same one line, not a crash loop of tracebacks.
    more = small_fs.fill("filler-2")
    service.start()
    wait_until(lambda: not service.running(), 120, what="the restart to stop on the full disk")
    assert service.process.wait() == 2
    assert service.log().count("its filesystem is full") >= 2
    assert "Traceback" not in service.log()

    filler.unlink()
    more.unlink()
    with service:
        records = read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(feed),
            timeout=300,
            settle=5.0,
            service=service,
        )
        assert service.stop() == 0, service.log()[-3000:]

    decisions = decisions_by_id(records, ids, delivery)
    with IndexStore.open(state, OPTIONS) as store:
        assert store.stats().articles == len(ids)
        for article_id in ids:
            record = store.get(article_id)
            assert record is not None
            kept = stored.decode(article_id, record.payload)
            assert kept.kind.value == decisions[article_id][0]["decision"]
            assert kept.cluster_id == decisions[article_id][0]["cluster_id"]


def flip_bytes(path: Path, length: int = 64) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, min(middle + length, len(data))):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def newsdedup(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NEWSDEDUP, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_damaged_state_is_refused_with_one_line_and_rebuilt_from_the_feed(
    kafka_bootstrap, new_topic, tmp_path
):
    """One input partition, so the replay sees the articles in the service's own order and
    must rebuild exactly the records behind the published decisions."""
    topics = Topics(new_topic("in"), new_topic("out"), new_topic("dlq"))
    feed = corpus_feed(2000)
    first, later = feed[:1500], feed[1500:]
    reposts = [{**a, "id": f"repost-{a['id']}"} for a in first[::15]]
    state = tmp_path / "state"
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        state,
        tmp_path / "svc.log",
        group_id="damaged",
        delivery="exactly_once",
    )
    produce(kafka_bootstrap, topics.input, first)
    with service:
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(first), timeout=180, service=service
        )
        assert service.stop() == 0, service.log()[-3000:]
    published = {r.json()["id"]: r.json() for r in records}
    assert len(published) == len(records) == len(first)

    ssts = list(state.glob("*.sst"))
    assert ssts, "a clean stop flushes the index into SST files"
    for sst in ssts:
        flip_bytes(sst)

    stats = newsdedup("index", "stats", "--state", str(state), env=service.env)
    assert stats.returncode == 2, stats.stderr
    lines = stats.stderr.splitlines()
    assert len(lines) == 1, stats.stderr
    assert lines[0].startswith(f"newsdedup: error: the index in {state} is damaged")
    assert f"newsdedup index rebuild --from-feed --state {state}" in lines[0]

    service.start()
    wait_until(lambda: not service.running(), 120, what="the service to refuse the index")
    assert service.process.wait() == 2
    log = service.log()
    assert "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if line.startswith("newsdedup: error:")]
    assert errors == [lines[0]], log[-3000:]

    # The recovery README.md describes for the default role.
    state.rename(tmp_path / "state.damaged")
    rebuilt = newsdedup("index", "rebuild", "--from-feed", "--state", str(state), env=service.env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "warning" not in rebuilt.stderr, rebuilt.stderr
    with IndexStore.open(state, OPTIONS) as store:
        assert store.stats().articles == len(first)
        for article_id, decision in published.items():
            record = store.get(article_id)
            assert record is not None, article_id
            kept = stored.decode(article_id, record.payload)
            assert (kept.kind.value, kept.cluster_id, kept.matched_id) == (
                decision["decision"],
                decision["cluster_id"],
                decision["matched_id"],
            )

    # The service continues from its committed offsets: nothing decided twice, and reposts of
    # articles decided before the damage are found in the rebuilt index.
    produce(kafka_bootstrap, topics.input, later + reposts)
    with service:
        records = read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(feed) + len(reposts),
            timeout=180,
            settle=5.0,
            service=service,
        )
        assert service.stop() == 0, service.log()[-3000:]
    ids = [r.json()["id"] for r in records]
    assert sorted(ids) == sorted(a["id"] for a in feed + reposts)
    decisions = {r.json()["id"]: r.json() for r in records}
    for repost in reposts:
        original = published[repost["id"].removeprefix("repost-")]
        decided = decisions[repost["id"]]
        assert decided["decision"] == "duplicate", (decided, original)
        assert decided["cluster_id"] == original["cluster_id"]


def test_damaged_decide_index_names_its_partition_and_is_restored_from_the_changelog(
    kafka_bootstrap, topics, tmp_path
):
    options = scaleout_options()
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    internal, changelog = options["scaleout_internal_topic"], options["scaleout_changelog_topic"]
    for topic in (internal, changelog):
        admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)
    records = 2000
    _produce_changes(kafka_bootstrap, changelog, records)  # to partition 0, domain ""
    state = tmp_path / "decide"
    decider = RoleProcess(
        "decide",
        kafka_bootstrap,
        topics,
        state,
        tmp_path / "decide.log",
        group_id="damaged-decide",
        scaleout_instance_id="decide-0",
        **options,
    )

    def ready() -> bool:
        assert decider.running(), decider.log()[-3000:]
        try:
            return decider.get("/readyz")[0] == 200
        except OSError:  # not listening yet
            return False

    with decider:
        wait_until(ready, 120, what="the first restore")
        assert decider.stop() == 0, decider.log()[-3000:]
    partition = state / "partition-0"
    (domain,) = partition.glob("domain=*")
    ssts = list(domain.glob("*.sst"))
    assert ssts
    for sst in ssts:
        flip_bytes(sst)

    decider.start()
    wait_until(lambda: not decider.running(), 120, what="the decider to refuse its index")
    assert decider.process.wait() == 2
    log = decider.log()
    assert "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if line.startswith("newsdedup: error:")]
    assert len(errors) == 1, log[-3000:]
    assert errors[0].startswith(f"newsdedup: error: the index in {domain} is damaged")
    assert f"mv {partition} {partition}.damaged" in errors[0]

    # The recovery README.md describes for the decide role.
    partition.rename(state / "partition-0.damaged")
    with decider:
        wait_until(ready, 120, what="the restore after the damage")
        assert decider.stop() == 0, decider.log()[-3000:]
    restored = [
        json.loads(line)
        for line in decider.log().splitlines()
        if '"restore finished"' in line and '"partition": 0' in line
    ]
    assert restored[-1]["read"] == records
    with IndexStore.open(domain, read_only=True) as store:
        assert store.stats().articles == records


def test_full_disk_stops_a_decide_instance_cleanly_and_its_restart_resumes(
    kafka_bootstrap, topics, tmp_path, small_fs
):
    """The decide role's loop commits its domain indexes first too: on a full disk it stops
    with the same line before publishing the batch, and resumes after a restart."""
    feed = corpus_feed(FEED_ARTICLES // 2)
    half = len(feed) // 2
    options = scaleout_options(index_memory=INDEX_MEMORY)
    common = dict(group_id="diskfull-roles", delivery="exactly_once", **options)
    fingerprint = RoleProcess(
        "fingerprint",
        kafka_bootstrap,
        topics,
        tmp_path / "fingerprint",
        tmp_path / "fingerprint.log",
        scaleout_instance_id="fingerprint-0",
        **common,
    )
    decider = RoleProcess(
        "decide",
        kafka_bootstrap,
        topics,
        small_fs.path / "decide",
        tmp_path / "decide.log",
        scaleout_instance_id="decide-0",
        **common,
    )
    produce(kafka_bootstrap, topics.input, feed[:half])
    with fingerprint:
        with decider:
            read_all(kafka_bootstrap, topics.output, expected=half, timeout=180, service=decider)
            filler = small_fs.fill()
            produce(kafka_bootstrap, topics.input, feed[half:])
            wait_until(lambda: not decider.running(), 120, what="the decider to stop")
            assert decider.process.wait() == 2
        log = decider.log()
        assert "Traceback" not in log, log[-3000:]
        errors = [line for line in log.splitlines() if line.startswith("newsdedup: error:")]
        assert len(errors) == 1 and "its filesystem is full" in errors[0], log[-3000:]
        visible = read_all(kafka_bootstrap, topics.output, expected=0, timeout=30)
        assert len(visible) < len(feed), "the full disk was met before the feed's end"
        assert len({r.json()["id"] for r in visible}) == len(visible)

        filler.unlink()
        with decider:
            records = read_all(
                kafka_bootstrap,
                topics.output,
                expected=len(feed),
                timeout=300,
                settle=5.0,
                service=decider,
            )
            assert decider.stop() == 0, decider.log()[-3000:]
        assert fingerprint.stop() == 0, fingerprint.log()[-3000:]
    ids = sorted(r.json()["id"] for r in records)
    assert ids == sorted(a["id"] for a in feed), "an article lost or decided twice"
