"""Event time through the real broker: the decisions of a multi-partition feed with a backlog are
those of its articles in publish order, whichever partition the consumer happens to read first,
across a SIGKILL and restart, with undated articles among them."""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from service_support import (
    NEWSDEDUP,
    ServiceProcess,
    Topics,
    read_all,
    set_topic_config,
    wait_until,
)

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.timetext import format_time_ms, parse_event_time_ms
from indexstore import IndexStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3
BOILERPLATE = "\n（本文来源：示例晚报，编辑：测试）"


def _first_articles(name: str, n: int) -> list[dict]:
    articles = []
    for a in iter_jsonl(shared_data_dir() / name):
        if a.get("published_at") and len(a.get("content") or "") >= 200:
            articles.append({k: a[k] for k in ("id", "title", "content", "published_at")})
        if len(articles) >= n:
            break
    return sorted(articles, key=lambda a: parse_event_time_ms(a["published_at"]))


def _produce_spread(bootstrap: str, topic: str, feed: list[dict], seed: int) -> None:
    """Each article to a partition drawn at random, in feed order, without a key."""
    rng = random.Random(seed)
    _produce_to(bootstrap, topic, [(a, rng.randrange(PARTITIONS)) for a in feed])


def _produce_to(bootstrap: str, topic: str, placed: list[tuple[dict, int]]) -> None:
    """Each article to its partition, in this order, without a key."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    failures: list = []
    for article, partition in placed:
        value = json.dumps(article, ensure_ascii=False).encode()
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    partition=partition,
                    on_delivery=lambda e, m: e and failures.append(e),
                )
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    assert not failures


def _latest(records) -> dict[str, dict]:
    """The decision a reader that keeps the latest record per key ends with."""
    latest: dict[str, dict] = {}
    for r in records:
        decision = r.json()
        assert r.key == decision["id"].encode()
        latest[decision["id"]] = decision
    return latest


def _run_backlog(
    bootstrap: str,
    new_topic,
    tmp_path: Path,
    feed: list[dict],
    *,
    delivery: str,
    kill_midway: bool,
    seed: int = 7,
    produce_live: Callable[[str], None] | None = None,
    **more_options: str,
) -> list:
    """`feed` spread over the partitions at random, decided by one `--role all` instance,
    SIGKILLed and started again a third of the way (`kill_midway`); or, with `produce_live`,
    produced by it into the given topic while the service runs."""
    topics = Topics(new_topic("in", partitions=PARTITIONS), new_topic("out"), new_topic("dlq"))
    if produce_live is None:
        _produce_spread(bootstrap, topics.input, feed, seed)
    # The restarted instance is another member (another metrics port, so another instance
    # id): it gets the partitions once the killed one's session ends, 45 s by default.
    options = {
        "group_id": f"et-{delivery}",
        "delivery": delivery,
        "kafka_client_session_timeout_ms": "6000",
        **more_options,
    }
    state = tmp_path / "state"
    service = ServiceProcess(bootstrap, topics, state, tmp_path / "svc.log", **options)
    with service:
        if produce_live is not None:
            wait_until(lambda: _answers(service, "/readyz") == 200, 60, what="ready")
            produce_live(topics.input)
        if kill_midway:
            wait_until(
                lambda: _decided(service) >= len(feed) // 3,
                timeout=180,
                what="a third of the feed decided",
            )
            service.kill()
            service = ServiceProcess(bootstrap, topics, state, tmp_path / "svc2.log", **options)
            service.start()
        records = read_all(
            bootstrap, topics.output, expected=len(feed), timeout=300, service=service
        )
        assert service.stop() == 0
    return records


def _misplaced_reposts(latest: dict[str, dict], reposts: dict[str, str]) -> list[str]:
    """What went wrong with each planted repost (repost id -> original id): an original taken
    for a copy of its own repost, or a repost outside its original's cluster."""
    wrong = []
    for copy_id, original_id in reposts.items():
        original, copy = latest[original_id], latest[copy_id]
        if original["decision"] != "unique" and original["matched_id"] == copy_id:
            wrong.append(f"original {original_id} decided a copy of its repost {copy_id}")
        if copy["cluster_id"] != original["cluster_id"] or copy["decision"] == "unique":
            wrong.append(f"repost {copy_id} not in the cluster of {original_id}: {copy}")
    return wrong


def _answers(service: ServiceProcess, path: str) -> int:
    try:
        return service.get(path)[0]
    except OSError:
        return 0


def _decided(service: ServiceProcess) -> float:
    """Articles decided so far, from the service's own /metrics."""
    try:
        _, text = service.get("/metrics")
    except OSError:
        return 0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("newsdedup_articles_total{")
    )


def _with_reposts(articles: list[dict], rng: random.Random) -> tuple[list[dict], dict, dict]:
    """The feed in publish order with 50 verbatim and 50 boilerplate reposts, each published
    500-600 s after its original under an id of its own."""
    originals = rng.sample(articles[: len(articles) * 2 // 3], 100)
    exact, padded, copies = {}, {}, []
    for i, original in enumerate(originals):
        delay_ms = rng.randrange(500_000, 600_000)
        when = format_time_ms(parse_event_time_ms(original["published_at"]) + delay_ms)
        copy = {**original, "id": f"copy-{i}-{original['id']}", "published_at": when}
        if i % 2:
            copy["content"] += BOILERPLATE
            padded[copy["id"]] = original["id"]
        else:
            exact[copy["id"]] = original["id"]
        copies.append(copy)
    feed = sorted(articles + copies, key=lambda a: parse_event_time_ms(a["published_at"]))
    return feed, exact, padded


@pytest.mark.parametrize(
    ("delivery", "kill_midway"), [("at_least_once", False), ("exactly_once", True)]
)
def test_originals_stay_unique_and_every_repost_names_its_original(
    kafka_bootstrap, new_topic, tmp_path, delivery, kill_midway
):
    articles = _first_articles("zh_cctv_xwlb_2022_2026.jsonl.gz", 3000)
    feed, exact, padded = _with_reposts(articles, random.Random(3))
    records = _run_backlog(
        kafka_bootstrap, new_topic, tmp_path, feed, delivery=delivery, kill_midway=kill_midway
    )
    latest = _latest(records)
    assert set(latest) == {a["id"] for a in feed}
    wrong = _misplaced_reposts(latest, {**exact, **padded})
    wrong += [
        f"verbatim repost {c} decided {latest[c]['decision']}"
        for c in exact
        if latest[c]["decision"] != "duplicate"
    ]
    assert not wrong, f"{len(wrong)} wrong, e.g. {wrong[:3]}"
    assert not any(d["late"] for d in latest.values())


def _check(feed_path: Path, tmp_path: Path, retention: str = "36500d") -> dict[str, dict]:
    out = tmp_path / "check.jsonl"
    env_path = tmp_path / "check.toml"
    segment = "30d" if retention == "36500d" else "1h"
    env_path.write_text(f'[index]\nretention = "{retention}"\nsegment = "{segment}"\n')
    done = subprocess.run(
        [NEWSDEDUP, "check", str(feed_path), "-o", str(out), "--config", str(env_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "late 0" in done.stderr, done.stderr
    latest = {}
    for line in out.read_text().splitlines():
        d = json.loads(line)
        latest[d["id"]] = d
    return latest


def test_a_replay_with_undated_articles_flags_what_check_flags_on_the_sorted_file(
    kafka_bootstrap, new_topic, tmp_path
):
    feed = _first_articles("en_reuters21578.jsonl.gz", 3000)
    feed_path = tmp_path / "sorted.jsonl"
    feed_path.write_text("".join(json.dumps(a) + "\n" for a in feed))
    expected = _check(feed_path, tmp_path)
    # One article in twenty loses its date: it takes its place in the stream instead.
    rng = random.Random(11)
    replayed = [{**a, "published_at": ""} if rng.random() < 0.05 else a for a in feed]
    records = _run_backlog(
        kafka_bootstrap, new_topic, tmp_path, replayed, delivery="at_least_once", kill_midway=False
    )
    latest = _latest(records)
    assert sum(d["late"] for d in latest.values()) == 0
    flagged = {i for i, d in latest.items() if d["decision"] != "unique"}
    want = {i for i, d in expected.items() if d["decision"] != "unique"}
    assert len(want) > 50
    # Articles published in the same second may swap which of them is the original.
    assert len(flagged ^ want) <= max(2, len(want) // 50), (len(flagged), len(want))


def test_check_gives_undated_lines_the_time_of_the_line_before(tmp_path):
    articles = _first_articles("zh_hkcnews_2017_2022.jsonl.gz", 2000)
    feed, _, _ = _with_reposts(articles, random.Random(5))
    dated = tmp_path / "dated.jsonl"
    dated.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in feed))
    undated = tmp_path / "undated.jsonl"
    rng = random.Random(2)
    lines = []
    for i, a in enumerate(feed):
        # The very first line undated too: it stands where the first dated line does.
        if i == 0 or rng.random() < 0.05:
            a = {**a, "published_at": ""}
        lines.append(json.dumps(a, ensure_ascii=False) + "\n")
    undated.write_text("".join(lines))
    want = {i for i, d in _check(dated, tmp_path).items() if d["decision"] != "unique"}
    got = {i for i, d in _check(undated, tmp_path).items() if d["decision"] != "unique"}
    assert len(want) >= 100
    assert len(got ^ want) <= len(want) // 50, (len(got), len(want))


def test_check_counts_late_and_undated_and_warns_when_many_are_late(tmp_path):
    now_ms = int(time.time() * 1000)
    lines = [
        *(
            {"id": f"new-{i}", "title": "t", "content": f"news {i}", "published_at": now_ms}
            for i in range(1200)
        ),
        # Far behind everything before them, too many to be taken for odd dates, and past the
        # reorder window (1,000 lines): what the window cannot put back in order is late.
        *(
            {"id": f"old-{i}", "title": "t", "content": f"story {i}", "published_at": 10**12}
            for i in range(400)
        ),
        {"id": "undated", "title": "t", "content": "no date"},
    ]
    path = tmp_path / "feed.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in lines))
    done = subprocess.run(
        [NEWSDEDUP, "check", str(path), "-o", str(tmp_path / "out.jsonl")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "late 400" in done.stderr and "undated 1" in done.stderr, done.stderr
    assert "warning: 25% of the articles were late" in done.stderr, done.stderr


def _run_scaleout_backlog(
    bootstrap: str,
    new_topic,
    tmp_path: Path,
    feed: list[dict],
    *,
    delivery: str,
    kill_midway: bool,
    seed: int = 9,
    **options: str,
) -> list:
    """The feed decided by three fingerprint instances and one decide instance, which is
    SIGKILLed and started again when a third is decided (`kill_midway`); every record of the
    output topic, checked for doubles under exactly_once."""
    from roles import RoleProcess, scaleout_options

    topics = Topics(new_topic("in", partitions=PARTITIONS), new_topic("out"), new_topic("dlq"))
    _produce_spread(bootstrap, topics.input, feed, seed=seed)
    common = dict(group_id=f"etr-{delivery}", delivery=delivery, **scaleout_options(**options))

    def role(name: str, n: int, log: str = "") -> RoleProcess:
        return RoleProcess(
            name,
            bootstrap,
            topics,
            tmp_path / f"{name}-{n}",
            tmp_path / f"{name}-{n}{log}.log",
            scaleout_instance_id=f"{name}-{n}",
            **common,
        )

    instances = [role("fingerprint", n) for n in range(3)] + [role("decide", 0)]
    try:
        for instance in instances:
            instance.start()
        if kill_midway:
            wait_until(
                lambda: _decided(instances[-1]) >= len(feed) // 3,
                timeout=240,
                what="a third of the feed decided",
            )
            instances[-1].kill()
            instances[-1] = role("decide", 0, "-restarted").start()
        records = read_all(
            bootstrap, topics.output, expected=len(feed), timeout=300, service=instances[-1]
        )
        for instance in instances:
            assert instance.stop() == 0, instance.log()[-2000:]
    finally:
        for instance in instances:
            if instance.process is not None:
                instance.kill()
    if delivery == "exactly_once":
        _assert_decided_once(records)
    return records


@pytest.mark.parametrize(
    ("delivery", "kill_midway"), [("at_least_once", True), ("exactly_once", True)]
)
def test_scaleout_roles_keep_originals_unique_across_fingerprint_instances(
    kafka_bootstrap, new_topic, tmp_path, delivery, kill_midway
):
    """Three fingerprint instances interleave their feed partitions in the internal topic; the
    decide instance orders them by event time again, and its commits say what it decided past
    the first record it still holds, so a SIGKILL neither loses nor (exactly_once) doubles."""
    articles = _first_articles("zh_cctv_xwlb_2022_2026.jsonl.gz", 1500)
    feed, exact, padded = _with_reposts(articles, random.Random(4))
    records = _run_scaleout_backlog(
        kafka_bootstrap, new_topic, tmp_path, feed, delivery=delivery, kill_midway=kill_midway
    )
    latest = _latest(records)
    assert set(latest) == {a["id"] for a in feed}
    wrong = _misplaced_reposts(latest, {**exact, **padded})
    assert not wrong, f"{len(wrong)} wrong, e.g. {wrong[:3]}"


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_scaleout_replay_with_undated_articles_flags_what_check_flags(
    kafka_bootstrap, new_topic, tmp_path, delivery
):
    """The fingerprint instances race through a backlog at their own paces, so one feed
    partition's records reach an internal partition long after another's: the decide role
    waits for them however long the idle bound is, and nothing goes late in a 72 h window."""
    feed = _first_articles("en_reuters21578.jsonl.gz", 3000)
    feed_path = tmp_path / "sorted.jsonl"
    feed_path.write_text("".join(json.dumps(a) + "\n" for a in feed))
    expected = _check(feed_path, tmp_path, retention="72h")
    rng = random.Random(13)
    replayed = [{**a, "published_at": ""} if rng.random() < 0.05 else a for a in feed]
    records = _run_scaleout_backlog(
        kafka_bootstrap,
        new_topic,
        tmp_path,
        replayed,
        delivery=delivery,
        kill_midway=True,
        index_retention="72h",
        index_segment="1h",
        # Far below the time a slower instance's records take to arrive: what is still on
        # the broker must be waited for whatever this bound says.
        service_partition_idle="50ms",
    )
    latest = _latest(records)
    assert set(latest) == {a["id"] for a in feed}
    late = sum(d["late"] for d in latest.values())
    flagged = {i for i, d in latest.items() if d["decision"] != "unique"}
    want = {i for i, d in expected.items() if d["decision"] != "unique"}
    assert len(want) > 50
    assert late == 0 and len(flagged ^ want) <= max(2, len(want) // 50), (
        late,
        len(flagged),
        len(want),
    )


def _with_retried_batch(bootstrap: str, feed: list[dict], seed: int) -> Callable[[str], None]:
    """A backfill produced at full speed while the service reads it, spread over the
    partitions in publish order, except that 200 articles land on partition 0 a moment after
    the 600 published after them, as a batch that a producer without idempotence retried:
    weeks of event time, read as fast as it is produced."""
    rng = random.Random(seed)
    early, later = feed[1000:1200], feed[1200:1800]

    def produce(topic: str) -> None:
        _produce_to(bootstrap, topic, [(a, rng.randrange(PARTITIONS)) for a in feed[:1000]])
        _produce_to(bootstrap, topic, [(a, 0) for a in later])
        time.sleep(0.5)  # the failed request, and the retry's back-off
        _produce_to(bootstrap, topic, [(a, 0) for a in early])
        _produce_to(bootstrap, topic, [(a, rng.randrange(PARTITIONS)) for a in feed[1800:]])

    return produce


def _assert_as_check_decides(records, expected: dict[str, dict], min_flagged: int = 1) -> None:
    """Every article decided, none late, and the articles flagged are those `check` flags on
    the sorted feed (`expected`), which flags at least `min_flagged`. Articles published in
    the same second may swap which of them is the original."""
    latest = _latest(records)
    assert set(latest) == set(expected)
    assert sum(d["late"] for d in latest.values()) == 0
    flagged = {i for i, d in latest.items() if d["decision"] != "unique"}
    want = {i for i, d in expected.items() if d["decision"] != "unique"}
    assert len(want) >= min_flagged
    assert len(flagged ^ want) <= max(2, len(want) // 50), (len(flagged), len(want))


def _assert_decided_once(records) -> None:
    """No article decided twice: every record beyond an article's first is a correction."""
    per_id: dict[str, int] = {}
    for r in records:
        d = r.json()
        if not d.get("correction"):
            per_id[d["id"]] = per_id.get(d["id"], 0) + 1
    doubled = [i for i, n in per_id.items() if n > 1]
    assert not doubled, f"{len(doubled)} decided twice, e.g. {doubled[:3]}"


@pytest.mark.parametrize(
    ("delivery", "kill_midway"), [("at_least_once", False), ("exactly_once", True)]
)
def test_a_retried_batch_behind_later_articles_is_decided_as_check_decides_the_sorted_feed(
    kafka_bootstrap, new_topic, tmp_path, delivery, kill_midway
):
    """The reorder window puts the retried batch back in event-time order before deciding
    (the partition's old records wait at its end for stragglers): none of it goes late in a
    72 h window, the flags are check's on the sorted feed, and the commits that name what was
    decided past the first held record neither lose nor (under exactly_once, across a
    SIGKILL) double a decision."""
    feed = _first_articles("en_reuters21578.jsonl.gz", 3000)
    feed_path = tmp_path / "sorted.jsonl"
    feed_path.write_text("".join(json.dumps(a) + "\n" for a in feed))
    expected = _check(feed_path, tmp_path, retention="72h")
    records = _run_backlog(
        kafka_bootstrap,
        new_topic,
        tmp_path,
        feed,
        delivery=delivery,
        kill_midway=kill_midway,
        produce_live=_with_retried_batch(kafka_bootstrap, feed, seed=17),
        index_retention="72h",
        index_segment="1h",
    )
    if delivery == "exactly_once":
        _assert_decided_once(records)
    _assert_as_check_decides(records, expected, min_flagged=51)


def test_a_batch_read_again_after_its_outputs_failed_is_answered_as_it_was_decided(
    kafka_bootstrap, kafka_admin, new_topic, tmp_path
):
    """The output topic refuses the decisions at first, so the batch in hand is written to
    the index and read again, as after a SIGKILL between the index write and the commit. In
    a backfill a batch of 500 Reuters articles spans days of event time, more than a 24 h
    window: the expiry between the attempts must not drop the oldest articles of a batch whose
    decisions never left the process, or they are decided afresh, late. None is late, and the
    flags are check's."""
    feed = _first_articles("en_reuters21578.jsonl.gz", 1500)
    feed_path = tmp_path / "sorted.jsonl"
    feed_path.write_text("".join(json.dumps(a) + "\n" for a in feed))
    expected = _check(feed_path, tmp_path, retention="24h")
    topics = Topics(new_topic("in", partitions=PARTITIONS), new_topic("out"), new_topic("dlq"))
    set_topic_config(kafka_admin, topics.output, "max.message.bytes", "64")
    _produce_spread(kafka_bootstrap, topics.input, feed, seed=5)
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id="refused-backfill",
        index_retention="24h",
        index_segment="1h",
    )
    with service:
        wait_until(lambda: service.log().count("outputs not delivered") >= 2, 90, what="retries")
        set_topic_config(kafka_admin, topics.output, "max.message.bytes", "1048588")
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(feed), timeout=120, service=service
        )
        assert service.stop() == 0
    _assert_as_check_decides(records, expected)


def test_a_batch_killed_before_its_transaction_commits_is_answered_as_decided(
    kafka_local, tmp_path
):
    """SIGKILL after a batch's index write and before its transaction commits: the broker is
    frozen while the one worker is still fingerprinting long articles it has fetched, so the
    next batch is written to the index and its commit hangs until the kill. The restart reads
    the batch again; a batch of a backfill spans more than the 6 h window, and none of its
    articles may be decided afresh and late. None is decided twice, and the flags are check's."""
    bootstrap = kafka_local.start()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = Topics("frozen.in", "frozen.out", "frozen.dlq")
    for future in admin.create_topics([NewTopic(topics.input, PARTITIONS, 1)]).values():
        future.result(30)
    feed = [
        {**a, "content": "\n".join([a["content"]] * 30)}
        for a in _first_articles("en_reuters21578.jsonl.gz", 600)
    ]
    feed_path = tmp_path / "sorted.jsonl"
    feed_path.write_text("".join(json.dumps(a) + "\n" for a in feed))
    expected = _check(feed_path, tmp_path, retention="6h")
    _produce_spread(bootstrap, topics.input, feed, seed=5)
    options = {
        "group_id": "frozen",
        "delivery": "exactly_once",
        "kafka_client_session_timeout_ms": "6000",
        "index_retention": "6h",
        "index_segment": "1h",
    }
    state = tmp_path / "state"
    service = ServiceProcess(bootstrap, topics, state, tmp_path / "svc.log", **options)
    with service:
        wait_until(lambda: _decided(service) >= 50, timeout=180, what="50 decided")
        kafka_local.freeze()
        try:
            time.sleep(5)  # the batch in hand is written to the index; its commit hangs
            service.kill()
        finally:
            kafka_local.thaw()
        with IndexStore.open(state, read_only=True) as index:
            written = index.stats().articles
        published = read_all(bootstrap, topics.output, expected=0, timeout=10, settle=2)
        # The scene this test is for: the index holds decisions no reader has seen.
        assert written > len(published), (written, len(published))
        service = ServiceProcess(bootstrap, topics, state, tmp_path / "svc2.log", **options)
        service.start()
        records = read_all(
            bootstrap, topics.output, expected=len(feed), timeout=300, service=service
        )
        assert service.stop() == 0
    _assert_decided_once(records)
    _assert_as_check_decides(records, expected)
