"""scripts/kafka-local: a real broker that starts, serves clients, stops, and fails clearly.

Each broker here is a test's own (fixture `kafka_local`), apart from the session broker.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:
    from conftest import LocalBroker

pytestmark = pytest.mark.kafka


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("kafka-local: error:")]
    assert len(lines) == 1, stderr
    assert stderr.strip().splitlines()[-1] == lines[0], "the error must be the last line"
    return lines[0]


def _path_without(tmp_path: Path, command: str) -> str:
    """A PATH offering every command of the current one except `command`."""
    bin_dir = tmp_path / f"path-without-{command}"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = bin_dir / entry.name
            if entry.name != command and not link.exists() and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    path = str(bin_dir)
    assert shutil.which(command, path=path) is None
    return path


def test_start_serves_a_produce_and_a_consume_then_stops(kafka_local: LocalBroker) -> None:
    bootstrap = kafka_local.start()
    assert bootstrap == kafka_local.bootstrap

    status = kafka_local.run("status")
    assert status.returncode == 0 and status.stdout.startswith("running"), status

    topic = f"kafka-local-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, key=b"k1", value="你好, kafka".encode())
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kafka-local-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        message = None
        deadline = time.monotonic() + 60
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(1.0)
            if polled is not None:
                assert polled.error() is None, polled.error()
                message = polled
        assert message is not None, "no message consumed within 60 s"
        assert (message.key(), message.value()) == (b"k1", "你好, kafka".encode())
        # A synchronous commit needs the group coordinator, i.e. a working offsets topic.
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()

    stopped = kafka_local.run("stop")
    assert stopped.returncode == 0, stopped
    status = kafka_local.run("status")
    assert (status.returncode, status.stdout.strip()) == (3, "stopped")
    assert kafka_local.run("stop").returncode == 0, "stop must be idempotent"


def test_a_second_start_uses_the_cache_and_never_maven(
    kafka_local: LocalBroker, tmp_path: Path
) -> None:
    fetched = kafka_local.run("fetch")
    assert fetched.returncode == 0, fetched.stderr

    started = kafka_local.run("start", PATH=_path_without(tmp_path, "mvn"))

    assert started.returncode == 0, started.stderr
    assert "downloading" not in started.stderr
    assert started.stdout.strip().splitlines()[-1] == kafka_local.bootstrap


def test_a_port_in_use_fails_with_one_clear_line(kafka_local: LocalBroker) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", kafka_local.port))
        squatter.listen()
        result = kafka_local.run("start")

    assert result.returncode != 0
    line = _error_line(result.stderr)
    assert f"port {kafka_local.port} is already in use" in line
    assert str(kafka_local.log_path) in line
    assert kafka_local.run("status").returncode == 3


def test_a_missing_cache_without_maven_fails_with_one_clear_line(
    kafka_local: LocalBroker, tmp_path: Path
) -> None:
    result = kafka_local.run(
        "start",
        PATH=_path_without(tmp_path, "mvn"),
        NEWSDEDUP_CACHE_DIR=str(tmp_path / "empty-cache"),
    )

    assert result.returncode != 0
    line = _error_line(result.stderr)
    assert "mvn is not installed" in line
    assert str(kafka_local.log_path) in line


def test_the_session_broker_creates_fresh_topics(new_topic, kafka_admin: AdminClient) -> None:
    first, second = new_topic("fixture", partitions=3), new_topic("fixture")

    assert first != second and first.startswith("fixture-")
    topics = kafka_admin.list_topics(timeout=10).topics
    assert len(topics[first].partitions) == 3
    assert len(topics[second].partitions) == 1
