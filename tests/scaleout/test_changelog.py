"""The changelog: its record layouts round-trip, and replaying it (`newsdedup index rebuild`,
the decide role's restore) rebuilds an index that holds the same records and answers every
search as the index that wrote it — also after updates and a compacted topic."""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from hypothesis import given
from hypothesis import strategies as st

from consumer.config import Config, IndexConfig
from consumer.deciding import stored
from consumer.deciding.boilerplate import sampled_keys
from consumer.fingerprint.shingles import encode_shingles
from consumer.ops.health import HealthState
from consumer.ops.metrics import Metrics
from consumer.records import Analyzed, Message, Source
from consumer.roles.decide import DecideStage
from consumer.roles.decider import Decider
from consumer.scaleout.domains import DomainStores
from consumer.scaleout.wire import (
    WireError,
    change_key,
    decode_changes,
    decode_fingerprinted,
    encode_change,
    encode_fingerprinted,
)
from consumer.stream.stage import Runtime
from indexstore import ArticleRecord, RecordColumns

NEWSDEDUP = str(Path(sys.executable).parent / "newsdedup")
INDEX = IndexConfig(retention="36500d", segment="30d")
T0 = 1_700_000_000_000

texts = st.text(max_size=40)


# Band keys are 4 bytes each and shingles up to about 2 KB (512 Rice-coded values): the
# lengths past the 8- and 16-bit limits of the other fields are what the layout must carry.
band_bytes = st.binary(max_size=64)
shingle_bytes = st.binary(max_size=2100)


@given(
    article_id=texts.filter(bool),
    domain=texts.filter(lambda d: "\0" not in d),
    simhash=st.integers(0, 2**64 - 1),
    chash=st.binary(min_size=16, max_size=16),
    event=st.integers(0, 2**62),
    payload=st.binary(max_size=40),
    sketch=st.binary(max_size=65),
    bands=band_bytes,
    shingles=shingle_bytes,
)
def test_change_record_round_trips(
    article_id, domain, simhash, chash, event, payload, sketch, bands, shingles
):
    record = ArticleRecord(article_id, simhash, chash, event, payload, sketch, bands, shingles)
    decoded = decode_changes([change_key(domain, article_id)], [encode_change(record)])
    assert {d: records_of(columns) for d, (_, columns) in decoded.items()} == {domain: [record]}


def records_of(columns: RecordColumns) -> list[ArticleRecord]:
    return [ArticleRecord(*row) for row in zip(*dataclasses.astuple(columns), strict=True)]


change_records = st.builds(
    ArticleRecord,
    texts.filter(bool),
    st.integers(0, 2**64 - 1),
    st.binary(min_size=16, max_size=16),
    st.integers(-(2**62), 2**62),
    st.binary(max_size=40),
    st.binary(max_size=65),
    band_bytes,
    shingle_bytes,
)


@given(
    changes=st.lists(st.tuples(st.sampled_from(["", "zh", "a\x01"]), change_records), max_size=30)
)
def test_changes_decoded_in_bulk_read_back_by_domain(changes):
    """Alone or many, in one domain or several, with and without bands and shingles."""
    keys = [change_key(domain, record.article_id) for domain, record in changes]
    values = [encode_change(record) for _, record in changes]
    want: dict[str, tuple[list[int], list[ArticleRecord]]] = {}
    for i, (domain, record) in enumerate(changes):
        want.setdefault(domain, ([], []))[0].append(i)
        want[domain][1].append(record)
    bulk = {
        domain: (at, records_of(columns))
        for domain, (at, columns) in decode_changes(keys, values).items()
    }
    assert bulk == want


def test_changelog_records_of_other_versions_or_cut_short_are_refused():
    record = ArticleRecord("a", 1, b"\0" * 16, 5, b"p", b"s", b"b" * 64, b"S" * 900)
    good = encode_change(record)
    for key, value in [
        (b"no separator", good),
        (change_key("", "a"), good[:20]),
        (change_key("", "a"), b""),
        (change_key("", "a"), b"\x01" + good[1:]),
        (change_key("", "a"), b"\x03" + good[1:]),
        (change_key("", "a"), b"\x05" + good[1:]),
    ]:
        for keys, values in [([change_key("", "b"), key], [good, value]), ([key], [value])]:
            with pytest.raises(WireError):
                decode_changes(keys, values)


INTERNAL_FIELDS = dict(
    article_id=texts.filter(bool),
    domain=texts,
    simhash=st.integers(0, 2**64 - 1),
    event=st.integers(-(2**62), 2**62),
    topic=texts,
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(0, 2**62),
    sketch=st.binary(max_size=65),
    chars=st.integers(0, 2**32 - 1),
    dated=st.booleans(),
)


@given(**INTERNAL_FIELDS, bands=st.binary(max_size=64), shingles=st.binary(max_size=2100))
def test_internal_record_round_trips(
    article_id,
    domain,
    simhash,
    event,
    topic,
    partition,
    offset,
    sketch,
    bands,
    shingles,
    chars,
    dated,
):
    item = Analyzed(
        article_id,
        event,
        simhash,
        b"\x01" * 16,
        sketch,
        bands=bands,
        shingles=shingles,
        text_chars=chars,
        dated=dated,
    )
    source = Source(topic, partition, offset)
    decoded = decode_fingerprinted(domain.encode(), encode_fingerprinted(item, source))
    assert (decoded.domain, decoded.item, decoded.source) == (domain, item, source)


def test_internal_records_of_unknown_versions_or_cut_short_are_refused():
    item = Analyzed(
        "a1", T0, 42, b"\x01" * 16, b"sk", bands=b"b" * 64, shingles=b"S" * 700, text_chars=120
    )
    good = encode_fingerprinted(item, Source("feed", 2, 9))
    for bad in [b"", good[:30], b"\x01" + good[1:], b"\x03" + good[1:], b"\x05" + good[1:]]:
        with pytest.raises(WireError):
            decode_fingerprinted(b"", bad)


def synthetic_feed(n: int, seed: int = 7) -> list[Analyzed]:
    """Articles with near-duplicates at distance 0..4, exact reposts, and updates of earlier ids
    (same id, other content), in event-time order with some late stragglers; each with its own
    (random) bands, and shingles of which a few hundred are a template all of them share, so
    that the index counts boilerplate; a near-duplicate rewrites its original's other
    shingles, so that some are copies that count theirs too."""
    rng = random.Random(seed)
    extra = random.Random(seed + 1)  # apart, so the articles are those of the feed without them
    template = [extra.getrandbits(64) for _ in range(300)]
    feed: list[Analyzed] = []
    owns: list[list[int]] = []
    for i in range(n):
        event = T0 + i * 60_000 - (3_600_000 if i % 17 == 0 else 0)
        roll = rng.random()
        base_own: list[int] = []
        if feed and roll < 0.3:
            at = rng.randrange(len(feed))
            base, base_own = feed[at], owns[at]
            flips = rng.sample(range(64), rng.randint(0, 4))
            simhash = base.simhash
            for bit in flips:
                simhash ^= 1 << bit
            chash = base.content_hash if not flips else rng.randbytes(16)
            article = Analyzed(f"a{i}", event, simhash, chash)
        elif feed and roll < 0.38:
            old = rng.choice(feed)
            article = Analyzed(old.id, event, rng.getrandbits(64), rng.randbytes(16))
        else:
            article = Analyzed(f"a{i}", event, rng.getrandbits(64), rng.randbytes(16))
        own = [extra.getrandbits(64) for _ in range(extra.randint(100, 900))]
        if base_own:
            # A rewrite: 70 % of the original's own story kept, as much as 40 % of it added.
            # A long one has enough of its own on both sides to count its sample as well.
            kept, added = len(base_own) * 7 // 10, len(base_own) * 4 // 10
            own = base_own[:kept] + [extra.getrandbits(64) for _ in range(added)]
        owns.append(own)
        bands = extra.randbytes(64)
        shingles = encode_shingles(b"C", np.array(template + own, dtype=np.uint64))
        # Long enough to be judged by its shingles (the short-text rules need a sketch).
        article = dataclasses.replace(article, bands=bands, shingles=shingles, text_chars=2000)
        feed.append(article)
    return feed


def decide_into(stores: DomainStores, feed: list[Analyzed], batch: int = 50) -> list[tuple]:
    """Run the decide role's decider over `feed` (partition 0, one domain), committing each batch;
    returns the changelog records it would produce, in order: one per article, and one more
    per correction (an article that arrives after a later-published copy decided unique)."""
    stage = Decider(stores)
    changes = []
    for start in range(0, len(feed), batch):
        messages = [
            Message(
                b"",
                encode_fingerprinted(a, Source("feed", 0, start + i)),
                Source("int", 0, start + i),
                0,
            )
            for i, a in enumerate(feed[start : start + batch])
        ]
        decided = stage.decide(messages)
        decided.index_batch.commit()
        changes.extend((c.key, c.value) for c in decided.changes)
        assert len(decided.changes) == len(messages) + len(decided.corrections)
    return changes


@pytest.mark.kafka
def test_rebuild_from_the_changelog_equals_the_index_that_wrote_it(
    kafka_bootstrap, kafka_admin, tmp_path
):
    feed = synthetic_feed(3000)
    with DomainStores(INDEX, tmp_path / "writer") as writer:
        changes = decide_into(writer, feed)
        # Every article's own record carries its bands and shingles to the changelog.
        carried = {(a.id, a.simhash, a.content_hash): (a.bands, a.shingles) for a in feed}
        ((_, columns),) = decode_changes(*zip(*changes, strict=True)).values()
        records = records_of(columns)
        carrying = {
            (r.article_id, r.simhash, r.content_hash)
            for r in records
            if (r.bands, r.shingles) == carried.get((r.article_id, r.simhash, r.content_hash))
        }
        assert carrying == set(carried)
        original = writer.store(0, "")
        ids = sorted({a.id for a in feed})
        want_records = {i: original.get(i) for i in ids}
        probes = [a.simhash ^ (1 << (n % 64)) for n, a in enumerate(feed[::7])]
        want_search = [
            tuple((i, distance, want_records[i].payload) for i, distance, _ in found)
            for found in _searches(original, probes)
        ]
        keys = np.unique(np.concatenate([sampled_keys(a.shingles) for a in feed]))
        want_frequencies = _frequencies(original, keys)
        assert want_frequencies.max() >= 3  # the template is counted as boilerplate
        # Copies that tell a story of their own beside the template count too.
        assert any(
            stored.counts_sample(r.payload) and not stored.is_own_cluster(r.payload)
            for r in want_records.values()
            if r is not None
        )

    topic = f"changelog-{os.urandom(5).hex()}"
    # Compaction allowed early; whether the cleaner ran before the replay or not, the rebuilt
    # index must be the same.
    config = {
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
    }
    kafka_admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(30)
    # Idempotent, as the decide role's producer is: a batch retried after the new topic's first
    # refusals (no leader yet) would otherwise land after later ones, and the topic would hold an
    # older record of an article after its newer one.
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "linger.ms": 5, "enable.idempotence": True}
    )
    for key, value in changes:
        producer.produce(topic, value=value, key=key, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(changes) >= len(feed)

    state = tmp_path / "rebuilt"
    env = {
        **os.environ,
        "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "NEWSDEDUP_SCALEOUT_CHANGELOG_TOPIC": topic,
        "NEWSDEDUP_INDEX_RETENTION": INDEX.retention,
        "NEWSDEDUP_INDEX_SEGMENT": INDEX.segment,
    }
    cmd = [NEWSDEDUP, "index", "rebuild", "--state", str(state), "--partition", "0"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{len(changes):,} records from offset 0" in done.stdout
    # A second run finds everything in place: it reads only the tail (nothing) and applies nothing.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert "0 records" in again.stdout and "0 applied" in again.stdout, again.stdout

    with DomainStores(INDEX, state) as rebuilt:
        store = rebuilt.store(0, "")
        assert {i: store.get(i) for i in ids} == want_records
        assert _searches(store, probes) == want_search
        assert _frequencies(store, keys).tolist() == want_frequencies.tolist()


def _frequencies(store, keys: np.ndarray) -> np.ndarray:
    with store.begin() as batch:
        counts = batch.frequencies(keys)
        batch.abort()
    return counts


def _searches(store, probes: list[int]) -> list[tuple]:
    out = []
    with store.begin() as batch:
        for probe in probes:
            result = batch.search(probe, b"\0" * 16, T0 + 10**9, limit=20)
            out.append(tuple((m.article_id, m.distance, m.payload) for m in result.matches))
        batch.abort()
    return out


@pytest.mark.kafka
def test_a_restore_waits_out_a_changelog_partition_the_broker_cannot_serve_yet(
    kafka_bootstrap, kafka_admin, tmp_path, caplog
):
    """Right after a topic is created, or while its leader moves, the broker refuses offset
    requests for a while (unknown partition, not its leader). A decide instance that restores
    then must wait and ask again, never stop on the error."""
    topic = f"changelog-{os.urandom(5).hex()}"  # not there yet: the broker refuses to serve it
    config = dataclasses.replace(
        Config(),
        kafka=dataclasses.replace(Config().kafka, bootstrap_servers=kafka_bootstrap),
        index=dataclasses.replace(INDEX, path=str(tmp_path / "state")),
        scaleout=dataclasses.replace(Config().scaleout, changelog_topic=topic),
    )
    runtime = Runtime(config, config, Metrics(), HealthState(), threading.Event(), lambda: None)
    stage = DecideStage(runtime)
    outcome: list[object] = []

    def restore() -> None:
        try:
            outcome.append(stage._restore(0))
        except Exception as e:  # what the service would stop on
            outcome.append(e)

    try:
        with caplog.at_level(logging.WARNING):
            worker = threading.Thread(target=restore)
            worker.start()
            time.sleep(2.0)
            assert not outcome, f"the restore ended before its changelog existed: {outcome}"
            kafka_admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            worker.join(60)
        assert outcome == [True]
        assert any("retrying" in r.getMessage() for r in caplog.records)
    finally:
        runtime.stop.set()
        worker.join(30)
        stage.stores.close()
