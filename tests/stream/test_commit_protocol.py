"""The commit protocol's order, step by step, with a producer and a consumer that only record
what they are asked to do. Beside the real-broker fault tests (test_service_faults,
test_kafka_faults, test_oversize_messages), which show what the order buys; this shows the order
itself, and that a failed step stops the ones after it."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, TopicPartition

from consumer.config import KafkaConfig
from consumer.records import Invalid, InvalidReason, Message, Rejection, Source
from consumer.stream import checkpoint as checkpoint_module
from consumer.stream.checkpoint import Checkpoint, OutputFailed
from consumer.stream.outputs import Outputs, Record


@dataclass
class _Delivered:
    """What a delivery report hands the callback."""

    _topic: str
    _partition: int
    _offset: int

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class _Recorder:
    """The calls of the index batch, the producer and the consumer, in one list."""

    def __init__(self, failing_topic: str | None = None) -> None:
        self.calls: list[str] = []
        self.failing_topic = failing_topic
        self._reports: list = []
        self._offsets: dict[tuple[str, int], int] = {}

    # the index batch
    def commit(self) -> None:
        self.calls.append("index")

    # the producer
    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None, **where):
        partition = where.get("partition", 0)
        offset = self._offsets.get((topic, partition), 0)
        self._offsets[(topic, partition)] = offset + 1
        error = KafkaError(KafkaError._MSG_TIMED_OUT) if topic == self.failing_topic else None
        self._reports.append((on_delivery, error, _Delivered(topic, partition, offset)))
        self.calls.append(f"produce {topic}")

    def _serve(self) -> None:
        reports, self._reports = self._reports, []
        for callback, error, message in reports:
            callback(error, message)

    def flush(self, timeout: float | None = None) -> int:
        self.calls.append("flush")
        self._serve()
        return 0

    def poll(self, timeout: float | None = None) -> int:
        self._serve()
        return 0

    def init_transactions(self, timeout: float | None = None) -> None:
        self.calls.append("init_transactions")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def send_offsets_to_transaction(self, offsets, metadata, timeout=None) -> None:
        self.calls.append(f"send_offsets {[(tp.partition, tp.offset) for tp in offsets]}")

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._serve()
        self.calls.append("commit_transaction")

    def abort_transaction(self, timeout: float | None = None) -> None:
        self.calls.append("abort_transaction")

    # the consumer
    def consumer_group_metadata(self) -> object:
        return object()

    def commit_offsets(self, offsets, asynchronous=False) -> None:
        self.calls.append(f"commit_offsets {[(tp.partition, tp.offset) for tp in offsets]}")


class _Consumer:
    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    def commit(self, offsets, asynchronous=False) -> None:
        self.recorder.commit_offsets(offsets, asynchronous)

    def consumer_group_metadata(self) -> object:
        return object()


def _outputs(recorder: _Recorder) -> Outputs:
    rejected = Rejection(
        Message(b"k", b"not json", Source("news.raw", 0, 7), 0),
        Invalid(InvalidReason.NOT_JSON, "bad"),
    )
    records = [
        Record("news.decisions", b"a1", b"{}"),
        Record("news.changelog", b"\x00a1", b"rec", partition=2, report_offset=True),
    ]
    return Outputs(recorder, records, [rejected])


def _checkpoint(recorder: _Recorder, delivery: str) -> Checkpoint:
    config = KafkaConfig(delivery=delivery, output_topic="news.decisions", dlq_topic="news.dlq")
    return Checkpoint(_Consumer(recorder), lambda: recorder, config)  # type: ignore[arg-type]


OFFSETS = [TopicPartition("news.raw", 0, 8)]


def test_at_least_once_writes_the_index_then_delivers_then_commits_offsets() -> None:
    recorder = _Recorder()
    delivered = _checkpoint(recorder, "at_least_once").complete(_outputs(recorder), OFFSETS)
    assert recorder.calls == [
        "index",
        "produce news.decisions",
        "produce news.changelog",
        "produce news.dlq",
        "flush",
        "commit_offsets [(0, 8)]",
    ]
    # Only the record that asked is reported: the others' deliveries are not tracked.
    assert delivered == {("news.changelog", 2): 0}


def test_exactly_once_puts_outputs_and_offsets_in_one_transaction_after_the_index() -> None:
    recorder = _Recorder()
    _checkpoint(recorder, "exactly_once").complete(_outputs(recorder), OFFSETS)
    assert recorder.calls == [
        "init_transactions",
        "index",
        "begin",
        "produce news.decisions",
        "produce news.changelog",
        "produce news.dlq",
        "send_offsets [(0, 8)]",
        "commit_transaction",
    ]


@pytest.mark.parametrize("failing_topic", ["news.decisions", "news.changelog"])
def test_an_output_not_delivered_leaves_the_offsets_uncommitted(failing_topic: str) -> None:
    recorder = _Recorder(failing_topic=failing_topic)
    checkpoint = _checkpoint(recorder, "at_least_once")
    with pytest.raises(OutputFailed, match=re.escape(failing_topic)):
        checkpoint.complete(_outputs(recorder), OFFSETS)
    assert recorder.calls[0] == "index"  # the index stands: the retry answers from it
    assert not any(call.startswith("commit_offsets") for call in recorder.calls)


class _StuckInSendOffsets(_Recorder):
    """A producer that never returns from sending the offsets, as librdkafka can while the
    group coordinator is away: only `release` lets the call end."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def send_offsets_to_transaction(self, offsets, metadata, timeout=None) -> None:
        self.calls.append("send_offsets (stuck)")
        self.release.wait()


@pytest.mark.parametrize("given_up_by", ["timeout", "stop"])
def test_a_producer_stuck_in_send_offsets_is_given_up_and_replaced(monkeypatch, given_up_by):
    monkeypatch.setattr(checkpoint_module, "_SEND_OFFSETS_S", 0.3)
    monkeypatch.setattr(checkpoint_module, "_SEND_OFFSETS_GRACE_S", 0.2)
    monkeypatch.setattr(checkpoint_module, "_WAIT_SLICE_S", 0.05)
    stuck, fresh = _StuckInSendOffsets(), _Recorder()
    producers = iter([stuck, fresh])
    config = KafkaConfig(delivery="exactly_once", output_topic="news.decisions")
    checkpoint = Checkpoint(_Consumer(stuck), lambda: next(producers), config)  # type: ignore[arg-type]
    if given_up_by == "stop":
        checkpoint.stopping = lambda: True
    started = time.monotonic()
    try:
        with pytest.raises(OutputFailed, match="did not return from sending the offsets"):
            checkpoint.complete(_outputs(stuck), OFFSETS)
        waited = time.monotonic() - started
        # A stop gives it up within one wait slice; otherwise after the timeout and the grace.
        assert waited < 0.3 if given_up_by == "stop" else 0.5 <= waited < 2.0
        assert "abort_transaction" not in stuck.calls  # it would block behind the stuck call
        # The batch again, on a new producer with the same transactional.id (which fences the
        # stuck one): outputs and offsets in one transaction.
        checkpoint.stopping = lambda: False
        checkpoint.complete(_outputs(fresh), OFFSETS)
        assert fresh.calls[:3] == ["index", "init_transactions", "begin"]
        assert fresh.calls[-2:] == ["send_offsets [(0, 8)]", "commit_transaction"]
    finally:
        stuck.release.set()
