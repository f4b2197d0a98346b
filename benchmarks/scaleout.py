"""`python -m benchmarks restore` and `… scaleout`: the two costs of scaling out."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks import KAFKA_LOCAL
from benchmarks.processes import load_feed
from consumer.config import IndexConfig
from consumer.deciding import stored
from consumer.deciding.stored import StoredDecision
from consumer.errors import NewsdedupError
from consumer.harness.broker import PrivateBroker, free_port
from consumer.records import DecisionKind
from consumer.scaleout.changelog import restore_partition
from consumer.scaleout.domains import DomainStores
from consumer.scaleout.wire import change_key, encode_change
from indexstore import ArticleRecord

NEWSDEDUP = str(Path(sys.executable).parent / "newsdedup")
HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class RestoreMeasurement:
    records: int
    produce_seconds: float
    restore_seconds: float
    restore_per_second: float
    restore_per_cpu_second: float  # this process's CPU time, librdkafka's threads included
    applied: int
    tail_seconds: float  # the same partition again, onto the restored directory
    tail_read: int
    disk_bytes: int


@dataclass(frozen=True, slots=True)
class ScaleoutRound:
    instances: int
    articles: int
    seconds: float
    articles_per_s: float


_RESTORE = """\
The cost of taking a partition over: N changelog records (synthetic articles spread over the
window) on a real broker, replayed into an empty state directory as a decide instance does when
it takes a partition over; then replayed again onto the restored directory (the tail-only
case)."""

_SCALEOUT = """\
What a second fingerprint instance adds: one feed on a 6-partition topic, fingerprinted by 1
and by 2 `run --role fingerprint` instances, in alternating rounds on fresh groups and internal
topics; throughput is N over the time from the first to the last internal record."""


def register(subparsers: argparse._SubParsersAction) -> None:
    r = subparsers.add_parser(
        "restore",
        help="changelog replay speed: records/s into an empty decide state directory",
        description=_RESTORE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument(
        "--records", type=int, default=1_000_000, help="changelog records (default %(default)s)"
    )
    r.add_argument("--bootstrap-servers", help="an existing broker (default: start a private one)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.set_defaults(handler=run_restore)

    s = subparsers.add_parser(
        "scaleout",
        help="fingerprint role throughput with 1 and 2 instances, alternating rounds",
        description=_SCALEOUT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--data", required=True, help="articles, JSONL or .jsonl.gz")
    s.add_argument(
        "--limit", type=int, default=20_000, help="articles per round (default %(default)s)"
    )
    s.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds of (1 instance, 2 instances; default %(default)s)",
    )
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        help="fingerprinting processes per instance (default %(default)s)",
    )
    s.add_argument("--bootstrap-servers", help="an existing broker (default: start a private one)")
    s.add_argument("--json", action="store_true", help="print results as JSON")
    s.set_defaults(handler=run_scaleout)


# -- restore --------------------------------------------------------------------------------


def run_restore(args: argparse.Namespace) -> int:
    with PrivateBroker(args.bootstrap_servers, KAFKA_LOCAL) as bootstrap:
        topic = _create(bootstrap, f"bench-{uuid.uuid4().hex[:8]}.changelog", 1)
        t0 = time.perf_counter()
        _produce_changes(bootstrap, topic, args.records)
        produced = time.perf_counter() - t0
        index = IndexConfig(expected_articles=max(args.records, 1))
        settings = {"bootstrap.servers": bootstrap}
        with tempfile.TemporaryDirectory(prefix="newsdedup-bench-restore-") as state:
            with DomainStores(index, state) as stores:
                cpu = time.process_time()
                first = restore_partition(settings, topic, 0, stores)
                cpu = time.process_time() - cpu
                disk = sum(s.stats().disk_bytes for s in stores.all_stores())
            with DomainStores(index, state) as stores:
                tail = restore_partition(settings, topic, 0, stores)
    result = RestoreMeasurement(
        records=args.records,
        produce_seconds=round(produced, 2),
        restore_seconds=round(first.seconds, 2),
        restore_per_second=round(first.per_second),
        restore_per_cpu_second=round(first.read / cpu) if cpu > 0 else 0,
        applied=first.applied,
        tail_seconds=round(tail.seconds, 3),
        tail_read=tail.read,
        disk_bytes=disk,
    )
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        print(
            f"restore of {result.records:,} changelog records into an empty directory: "
            f"{result.restore_seconds:.2f} s, {result.restore_per_second:,}/s, "
            f"{result.restore_per_cpu_second:,}/CPU-s "
            f"({result.applied:,} applied, {result.disk_bytes / 2**20:.0f} MiB on disk)\n"
            f"again onto the restored directory: {result.tail_read:,} read, "
            f"{result.tail_seconds:.3f} s\n"
            f"(producing them took {result.produce_seconds:.2f} s, not counted)"
        )
    return 0


def _produce_changes(bootstrap: str, topic: str, n: int) -> None:
    """N articles over the last 72 h, a third of them near-duplicates of an earlier one, as
    the decide role writes them (keys domain + id, one record per decided article)."""
    rng = random.Random(1)
    now = int(time.time() * 1000)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"}
    )
    simhashes: list[int] = []
    for i in range(n):
        article_id = f"bench-{i:09d}"
        event = now - 72 * HOUR_MS + i * (72 * HOUR_MS) // max(n, 1)
        if simhashes and i % 3 == 0:
            simhash = rng.choice(simhashes) ^ (1 << rng.randrange(64))
            kind, matched, distance = DecisionKind.NEAR_DUPLICATE, "bench-0", 1
        else:
            simhash = rng.getrandbits(64)
            kind, matched, distance = DecisionKind.UNIQUE, None, None
        if len(simhashes) < 10_000:
            simhashes.append(simhash)
        record = ArticleRecord(
            article_id,
            simhash,
            rng.randbytes(16),
            event,
            stored.encode(
                article_id,
                StoredDecision(
                    kind,
                    article_id if matched is None else matched,
                    matched,
                    distance,
                    False,
                    event,
                ),
            ),
        )
        value = encode_change(record)
        while True:
            try:
                producer.produce(topic, value=value, key=change_key("", article_id), partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120):
        raise NewsdedupError("the benchmark's changelog records were not all delivered")


def _create(bootstrap: str, topic: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


# -- scaleout -------------------------------------------------------------------------------


def run_scaleout(args: argparse.Namespace) -> int:
    values = load_feed(args.data, args.limit)
    if len(values) < args.limit:
        raise NewsdedupError(f"{args.data} has only {len(values)} articles")
    results: list[ScaleoutRound] = []
    with PrivateBroker(args.bootstrap_servers, KAFKA_LOCAL) as bootstrap:
        for _ in range(args.rounds):
            for instances in (1, 2):
                results.append(_round(bootstrap, values, instances, args.workers))
                print(
                    f"{instances} instance(s): {results[-1].articles_per_s:,.0f} articles/s",
                    file=sys.stderr,
                )
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print(f"{'instances':>9}  {'articles':>9}  {'seconds':>8}  {'articles/s':>10}")
        for r in results:
            print(
                f"{r.instances:>9}  {r.articles:>9,}  {r.seconds:>8.2f}  {r.articles_per_s:>10,.0f}"
            )
    return 0


def _produce_feed(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % 6)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)


def _round(bootstrap: str, values: list[bytes], instances: int, workers: int) -> ScaleoutRound:
    """Start the instances on an empty feed, wait until every one owns partitions (the group
    is settled, startup is over), then produce the feed and time its fingerprinting."""
    tag = uuid.uuid4().hex[:8]
    feed = _create(bootstrap, f"bench-{tag}.feed", 6)
    internal = f"bench-{tag}.internal"
    env = {
        **os.environ,
        "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "NEWSDEDUP_KAFKA_GROUP_ID": f"bench-{tag}",
        "NEWSDEDUP_KAFKA_INPUT_TOPIC": feed,
        "NEWSDEDUP_KAFKA_DLQ_TOPIC": f"bench-{tag}.dlq",
        "NEWSDEDUP_SCALEOUT_INTERNAL_TOPIC": internal,
        "NEWSDEDUP_SCALEOUT_CHANGELOG_TOPIC": f"bench-{tag}.changelog",
        "NEWSDEDUP_SERVICE_WORKERS": str(workers),
        "NEWSDEDUP_LOG_LEVEL": "WARNING",
    }
    processes, ports = [], []
    with tempfile.TemporaryDirectory(prefix="newsdedup-bench-scaleout-") as logs:
        try:
            for i in range(instances):
                ports.append(free_port())
                process_env = {
                    **env,
                    "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{ports[-1]}",
                    "NEWSDEDUP_SCALEOUT_INSTANCE_ID": f"bench-{i}",
                }
                with open(Path(logs) / f"{i}.log", "w") as log:
                    processes.append(
                        subprocess.Popen(
                            [NEWSDEDUP, "run", "--role", "fingerprint"],
                            env=process_env,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        )
                    )
            _wait_ready(ports, processes)
            _produce_feed(bootstrap, feed, values)
            first, last = _internal_span(bootstrap, internal, len(values), processes)
        finally:
            for p in processes:
                p.terminate()
            for p in processes:
                p.wait(30)
    seconds = (last - first) / 1000
    n = len(values)
    return ScaleoutRound(instances, n, round(seconds, 2), round(n / seconds if seconds else 0))


def _wait_ready(ports: list[int], processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise NewsdedupError("a fingerprint instance exited while starting")
        if all(_ready(port) for port in ports):
            return
        time.sleep(0.5)
    raise NewsdedupError("the fingerprint instances did not all become ready in 180 s")


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _internal_span(
    bootstrap: str, topic: str, n: int, processes: list[subprocess.Popen]
) -> tuple[int, int]:
    """Kafka timestamps (CreateTime, set by the instances) of the first and last of the n
    internal records."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10)
        if topic in meta.topics and meta.topics[topic].error is None:
            break
        time.sleep(0.5)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    partitions = len(meta.topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, first, last = 0, None, 0
    try:
        while seen < n and time.monotonic() < deadline:
            if any(p.poll() is not None for p in processes):
                raise NewsdedupError("a fingerprint instance exited during the benchmark")
            for m in consumer.consume(10_000, 0.5):
                if m.error():
                    continue
                ts = m.timestamp()[1]
                first = ts if first is None else min(first, ts)
                last = max(last, ts)
                seen += 1
    finally:
        consumer.close()
    if seen < n or first is None:
        raise NewsdedupError(f"only {seen} of {n} articles reached the internal topic")
    return first, last
