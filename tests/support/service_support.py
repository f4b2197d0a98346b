"""Driving a real `newsdedup run` process against the test broker, and reading what it wrote."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

NEWSDEDUP = str(Path(sys.executable).parent / "newsdedup")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True, slots=True)
class Topics:
    input: str
    output: str
    dlq: str


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    partition: int
    offset: int

    def json(self) -> dict:
        return json.loads(self.value)


class ServiceProcess:
    """One `newsdedup run` subprocess configured only through NEWSDEDUP_* variables."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        state_dir: Path,
        log_path: Path,
        *,
        group_id: str,
        delivery: str = "at_least_once",
        **options: str,
    ) -> None:
        self.metrics_port = free_port()
        self.log_path = log_path
        self.env = {
            **os.environ,
            "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "NEWSDEDUP_KAFKA_INPUT_TOPIC": topics.input,
            "NEWSDEDUP_KAFKA_OUTPUT_TOPIC": topics.output,
            "NEWSDEDUP_KAFKA_DLQ_TOPIC": topics.dlq,
            "NEWSDEDUP_KAFKA_GROUP_ID": group_id,
            "NEWSDEDUP_KAFKA_DELIVERY": delivery,
            "NEWSDEDUP_INDEX_PATH": str(state_dir),
            "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{self.metrics_port}",
            "NEWSDEDUP_SERVICE_WORKERS": "1",
            # The corpora are years old; a window that reaches back that far keeps them live.
            "NEWSDEDUP_INDEX_RETENTION": "36500d",
            "NEWSDEDUP_INDEX_SEGMENT": "30d",
            **{f"NEWSDEDUP_{k.upper()}": v for k, v in options.items()},
        }
        self.process: subprocess.Popen | None = None

    def start(self, own_group: bool = False) -> ServiceProcess:
        """With `own_group`, the service leads a process group of its own, as under `setsid`,
        so a signal can reach the whole group as `kill -- -PGID`, `timeout` and systemd send."""
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [NEWSDEDUP, "run"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=own_group,
        )
        log.close()
        return self

    def signal_group(self, signum: int) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signum)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        self.process = None
        return code

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.process = None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5
            ) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.kill()


def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[bytes | dict],
    key_field: str = "id",
    partition: int | None = None,
) -> int:
    """Produce values (dicts are JSON-encoded and keyed by their id) and wait for delivery."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 10, "enable.idempotence": True}
    )
    failures = []
    count = 0
    for value in values:
        if isinstance(value, dict):
            key = value.get(key_field)
            key = key.encode() if isinstance(key, str) else None
            value = json.dumps(value, ensure_ascii=False).encode()
        else:
            key = None
        kwargs = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=key,
                    on_delivery=lambda e, m: e and failures.append(e),
                    **kwargs,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    assert producer.flush(60) == 0
    assert not failures, failures
    return count


def read_all(
    bootstrap: str,
    topic: str,
    *,
    expected: int,
    timeout: float = 120.0,
    settle: float = 3.0,
    read_committed: bool = True,
    service: ServiceProcess | None = None,
    client: dict[str, str] | None = None,
) -> list[Record]:
    """Read `topic` from the start until at least `expected` records arrived and nothing new
    came for `settle` seconds (so extra, doubled records are seen too). With `service`, fail
    at once when that process has exited instead of waiting out the timeout. `client` adds
    librdkafka settings (security)."""
    consumer = Consumer(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
    )
    consumer.subscribe([topic])
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if service is not None and service.process is not None and not service.running():
                raise AssertionError(f"the service exited early:\n{service.log()[-3000:]}")
            batch = consumer.consume(1000, 0.5)
            for m in batch:
                if m.error():
                    continue
                records.append(
                    Record(m.key(), m.value(), dict(m.headers() or []), m.partition(), m.offset())
                )
                last_new = time.monotonic()
            if len(records) >= expected and time.monotonic() - last_new >= settle:
                break
    finally:
        consumer.close()
    return records


def committed_offsets(bootstrap: str, group_id: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


def set_topic_config(admin: AdminClient, topic: str, name: str, value: str) -> None:
    """What `kafka-configs --alter --add-config name=value` does to a topic."""
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def family_tree(pid: int) -> list[int]:
    """`pid` and every process below it (the fingerprinting workers, multiprocessing's helper)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(parents.get(current, []))
    return tree


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid`, wherever they were re-parented (zombies are
    dead and left out)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == pgid:
            members.append(int(entry.name))
    return members


def decisions_by_id(records: list[Record], ids: set[str], delivery: str) -> dict[str, list[dict]]:
    """Every article's decisions in the order read (the last is its answer), asserting what the
    delivery mode promises: each of `ids` decided, exactly once under exactly_once (a
    read_committed reader), or only ever with identical decisions under at_least_once. A
    correction (an article published earlier arrived later) is one more record under the key
    by design; from it on, the article's decision is the corrected one."""
    decisions: dict[str, list[dict]] = {}
    for r in records:
        d = r.json()
        decisions.setdefault(d["id"], []).append(d)
    assert set(decisions) == ids, f"{len(ids - set(decisions))} articles have no decision"
    if delivery == "exactly_once":
        doubled = [i for i, ds in decisions.items() if sum(not d.get("correction") for d in ds) > 1]
        assert not doubled, f"{len(doubled)} articles decided more than once, e.g. {doubled[:3]}"
    else:
        changed = [i for i, ds in decisions.items() if not _repeats_identical(ds)]
        assert not changed, f"re-emitted decisions differ, e.g. {decisions[changed[0]]}"
    return decisions


_VERDICT = ("decision", "cluster_id", "matched_id", "distance")


def _repeats_identical(ds: list[dict]) -> bool:
    """Repeats equal the first decision, or after a correction the corrected one (a repeat
    answered from the index then names its own message and the correction's time)."""
    first = ds[0]
    for d in ds:
        if d.get("correction"):
            first = {k: d[k] for k in _VERDICT}
        elif "decision" in first and len(first) == len(_VERDICT):
            if {k: d[k] for k in _VERDICT} != first:
                return False
        elif d != first:
            return False
    return True
