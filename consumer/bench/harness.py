"""What the Kafka benchmarks share: the feed's lines, a private broker, fresh topics, and the
CPU and memory of a service's process tree read from /proc."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from consumer.corpus import open_bytes
from consumer.errors import NewsdedupError

REPO = Path(__file__).resolve().parent.parent.parent


def load_feed(path: str, n: int) -> list[bytes]:
    """The first `n` lines that the service will decide (an id and some text), so every run
    knows how many decisions to wait for."""
    values = []
    with open_bytes(path) as f:
        for line in f:
            try:
                article = json.loads(line)
            except ValueError:
                continue
            if article.get("id") and (article.get("title") or article.get("content")):
                values.append(line.rstrip(b"\r\n"))
            if len(values) >= n:
                break
    return values


class PrivateBroker:
    """The given bootstrap, or a private scripts/kafka-local broker for the benchmark's life."""

    def __init__(self, bootstrap: str | None) -> None:
        self.bootstrap = bootstrap
        self.env: dict[str, str] | None = None

    def __enter__(self) -> str:
        if self.bootstrap:
            return self.bootstrap
        script = REPO / "scripts" / "kafka-local"
        if not script.exists():
            raise NewsdedupError(
                "no --bootstrap-servers given, and scripts/kafka-local, which starts a private "
                "broker, is only in a source checkout"
            )
        port = free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="newsdedup-bench-kafka-")
        self.env = {
            **os.environ,
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(free_port()),
            "KAFKA_DATA_DIR": self._dir.name,
            "KAFKA_HEAP": "-Xmx1g",
            "PYTHON": sys.executable,
        }
        out = subprocess.run([str(script), "start"], env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise NewsdedupError(f"could not start a broker: {out.stderr.strip()[-500:]}")
        return out.stdout.strip().splitlines()[-1]

    def __exit__(self, *exc: object) -> None:
        if self.env is not None:
            subprocess.run(
                [str(REPO / "scripts" / "kafka-local"), "stop"], env=self.env, capture_output=True
            )
            self._dir.cleanup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_topics(bootstrap: str, partitions: int) -> tuple[str, str, str]:
    run = uuid.uuid4().hex[:8]
    names = (f"bench-{run}.in", f"bench-{run}.out", f"bench-{run}.dlq")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(names[0], partitions, 1),
            NewTopic(names[1], partitions, 1),
            NewTopic(names[2], 1, 1),
        ]
    )
    for f in futures.values():
        f.result(30)
    return names


def process_tree(pid: int) -> list[int]:
    """`pid` and its children (one level: the worker pool). Children of every thread: the
    service starts its pool from a thread other than the main one."""
    pids = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            pids += [int(c) for c in children.read_text().split()]
        except OSError:
            continue
    return pids


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its worker processes so far."""
    ticks = 0
    for p in process_tree(pid):
        try:
            # After the command's closing parenthesis: fields 3 on; utime, stime are 14, 15.
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_rss(pid: int) -> int:
    """RSS in bytes of `pid` and its worker processes."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total
