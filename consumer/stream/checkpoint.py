"""The commit protocol: in what order a batch's effects become durable, in one place.

    1. index batch   — article records, search tables and input positions, one atomic write
    2. outputs       — decisions and DLQ records delivered (flushed, or inside the transaction)
    3. input offsets — committed to the group (or sent in the transaction, which then commits)

Why this order: the index is written before anything leaves the process, so an article that
is re-delivered after a crash at any later point finds its record in the article table and
re-emits the identical decision; nothing is decided twice differently, and nothing reaches the
output that the index could forget. Offsets come last, so a crash before them only causes
re-delivery (at-least-once: the same decision again; exactly-once: the aborted transaction's
decisions are never visible to read_committed readers, and the retry re-emits them from the
article table). Writing the index after the outputs would let a crash lose index entries for
decisions already published: later duplicates of those articles would be missed.

It is also the one place where every way a broker call can fail mid-batch (refused, timed
out, fenced, stuck) is turned into "retry the batch" or "stop". What a batch hands it is data
(outputs.py); how large a dead letter may be is dead_letters.py's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, final

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from consumer.config import KafkaConfig
from consumer.errors import NewsdedupError
from consumer.records import Rejection, Source
from consumer.stream.dead_letters import TOO_LARGE, DeadLetterLimit, dead_letter
from consumer.stream.outputs import Delivered, Outputs

log = logging.getLogger(__name__)

# Another instance took over our transactional.id: this one is a zombie and must stop.
_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


# The topic does not exist (deleted while we ran, or never created): the service creates it
# again before the retry, as it does at start.
MISSING_TOPIC_CODES = frozenset(
    {KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION}
)


# How long a transaction's commit is waited for before it is aborted (or, if the abort is
# refused, the producer replaced): its records time out after transaction.timeout.ms (60 s).
_COMMIT_WAIT_S = 60.0
# Waits on the broker (flush, commit) are cut into slices this long, so that a stop request
# during an outage ends them: the batch in hand is then left uncommitted and read again by the
# next run, which re-emits its decisions from the index. A call that cannot be sliced (sending
# the offsets) is bounded by [service] stop_timeout instead.
_WAIT_SLICE_S = 1.0
# send_offsets_to_transaction's own timeout, and how much longer it is given before the
# producer is taken for stuck (see Checkpoint._send_offsets).
_SEND_OFFSETS_S = 30.0
_SEND_OFFSETS_GRACE_S = 10.0


# A producer fenced again this soon after the last time shares its transactional.id with a
# live instance: the process stops instead of fencing it back.
_FENCED_AGAIN_S = 120.0


class ProducerFenced(NewsdedupError):
    """Another live producer uses our transactional.id: this process must stop."""


class OutputFailed(Exception):
    """The batch's outputs were not all delivered; the caller rewinds and retries the batch.
    `topic` names the topic that refused them, when known."""

    def __init__(self, reason: str, topic: str | None = None, code: int | None = None) -> None:
        super().__init__(f"topic {topic!r}: {reason}" if topic else reason)
        self.topic = topic
        self.code = code

    @property
    def topic_missing(self) -> bool:
        return self.code in MISSING_TOPIC_CODES


class _ProducerStuck(OutputFailed):
    """The producer hangs in a call to the broker: it was given up (Checkpoint._send_offsets)."""


@final
class Checkpoint:
    """Makes each batch's `Outputs` durable in protocol order, for every role: outputs come as
    data, so nothing here is specialised. Owns the producer: a producer that failed fatally
    (e.g. its transaction state was lost while the broker went away) is replaced by a fresh one
    with the same transactional.id, which fences the old one, and the batch is retried."""

    def __init__(
        self, consumer: Consumer, make_producer: Callable[[], Producer], config: KafkaConfig
    ) -> None:
        self.consumer = consumer
        self.config = config
        self.transactional = config.delivery == "exactly_once"
        self._make_producer = make_producer
        self._producer: Producer | None = None
        # (error, topic) of every failed delivery since the last flush or transaction
        self._delivery_errors: list[tuple[KafkaError, str]] = []
        # Set by the service: true once it has been asked to stop.
        self.stopping: Callable[[], bool] = lambda: False
        self.dead_letter_limit = DeadLetterLimit(config.client)
        self._last_fenced: float | None = None
        self._delivered: Delivered = {}
        try:
            self._ensure_producer()  # fences a zombie with our transactional.id right away
        except OutputFailed as e:
            log.warning("%s; retrying with the first batch", e)

    @property
    def producer(self) -> Producer:
        assert self._producer is not None
        return self._producer

    def complete(self, outputs: Outputs, offsets: Sequence[TopicPartition]) -> Delivered:
        """Make the batch durable in protocol order, adding each step's time to the batch's
        stage_seconds; returns where the records that ask were delivered. Raises OutputFailed
        when outputs were not delivered (the index write stands: a retry re-emits from it)."""
        stages = outputs.stage_seconds
        t0 = time.perf_counter()
        outputs.index.commit()  # 1
        t1 = time.perf_counter()
        stages["index"] = stages.get("index", 0.0) + (t1 - t0)
        self._delivered = {}
        try:
            self._ensure_producer()
            if self.transactional:
                self._complete_transaction(outputs, offsets)
            else:
                self._produce(outputs)  # 2
                self._flush()
                t2 = time.perf_counter()
                self._commit_offsets(offsets)  # 3
                stages["produce"] = t2 - t1
                stages["commit"] = time.perf_counter() - t2
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.code() in _FENCED:
                self._replace_fenced(error)
            if error.fatal():
                log.warning("the producer failed for good (%s); starting a new one", error.str())
                self._discard_producer()
            raise OutputFailed(error.str()) from None
        self.producer.poll(0)  # the delivery reports of a committed transaction
        return self._delivered

    def _replace_fenced(self, error: KafkaError) -> None:
        """Fenced once (e.g. the broker aborted a transaction that ran past its timeout): a new
        producer with our transactional.id takes over, and the batch is retried. Fenced again
        within `_FENCED_AGAIN_S`: another live instance uses our transactional.id (each would
        fence the other for ever), and we give way."""
        now = time.monotonic()
        if self._last_fenced is not None and now - self._last_fenced < _FENCED_AGAIN_S:
            raise ProducerFenced(
                f"another producer took over this instance's transactional.id ({error.str()}); "
                "give each instance its own [kafka] transactional_id"
            )
        self._last_fenced = now
        log.warning("the producer was fenced (%s); starting a new one", error.str())
        self._discard_producer()

    def close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.flush(5.0)
            except KafkaException as e:
                log.warning("flush at close failed: %s", e.args[0].str())
            except SystemError as e:
                # A producer that failed fatally (fenced) can leave librdkafka's callbacks in
                # an error state; what it held is re-read by the next run either way.
                log.warning("flush at close failed: %s", e)

    def _discard_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.purge()  # its queue is re-emitted from the index by the retry
                producer.flush(0)
            except KafkaException:
                pass

    def _ensure_producer(self) -> None:
        if self._producer is not None:
            return
        producer = self._make_producer()
        if self.transactional:
            try:
                producer.init_transactions(60.0)
            except KafkaException as e:
                if e.args[0].fatal():
                    raise
                raise OutputFailed(f"cannot start transactions: {e.args[0].str()}") from None
        self._producer = producer
        self._delivery_errors.clear()

    def _complete_transaction(self, outputs: Outputs, offsets: Sequence[TopicPartition]) -> None:
        try:
            t1 = time.perf_counter()
            self.producer.begin_transaction()
            self._produce(outputs)  # 2
            t2 = time.perf_counter()
            self._send_offsets(list(offsets))  # 3
            self._commit_transaction()
            outputs.stage_seconds["produce"] = t2 - t1
            outputs.stage_seconds["commit"] = time.perf_counter() - t2
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.fatal():
                raise  # complete() replaces the producer
            log.warning("transaction failed, aborting: %s", error.str())
            # A failed delivery is the cause worth naming (its topic, e.g. a missing one).
            failure = (
                self._delivery_failure()
                if self._delivery_errors
                else OutputFailed(error.str(), code=error.code())
            )
            self._abort()
            raise failure from None
        except _ProducerStuck as e:
            log.warning("transaction failed: %s", e)
            raise
        except OutputFailed as e:
            log.warning("transaction failed, aborting: %s", e)
            self._abort()
            raise
        if self._delivery_errors:
            # Cannot happen after a successful commit, but never lose track of a failure.
            raise self._delivery_failure()

    def _send_offsets(self, offsets: list[TopicPartition]) -> None:
        """The input offsets into the transaction, bounded. librdkafka can block in this call
        far past its timeout while the group coordinator is away (e.g. a broker restarting),
        which would hold the whole service; so the call runs on a thread of its own, and a
        producer still inside it after the timeout and a grace is given up: the next batch's
        producer, with the same transactional.id, fences it, and its open transaction is
        aborted by the coordinator. A stop gives it up at once, as `_abort` does."""
        producer = self.producer
        metadata = self.consumer.consumer_group_metadata()
        failure: list[BaseException] = []

        def send() -> None:
            try:
                producer.send_offsets_to_transaction(offsets, metadata, _SEND_OFFSETS_S)
            except BaseException as e:
                failure.append(e)

        sender = threading.Thread(target=send, name="send-offsets", daemon=True)
        sender.start()
        deadline = time.monotonic() + _SEND_OFFSETS_S + _SEND_OFFSETS_GRACE_S
        while sender.is_alive():
            sender.join(_WAIT_SLICE_S)
            if sender.is_alive() and (time.monotonic() > deadline or self.stopping()):
                # Not purged or flushed: the stuck thread still uses it. Dropped here, it
                # lives until that call returns.
                self._producer = None
                self._delivery_errors.clear()
                raise _ProducerStuck(
                    "the producer did not return from sending the offsets to the transaction "
                    f"within {_SEND_OFFSETS_S + _SEND_OFFSETS_GRACE_S:.0f} s (the group "
                    "coordinator away); a new producer retries the batch"
                )
        if failure:
            raise failure[0]

    def _commit_transaction(self) -> None:
        # A commit that times out goes on inside librdkafka: calling it again waits for that
        # same commit, which ends in success or in an error (e.g. its records timing out after
        # transaction.timeout.ms). Any other transaction call meanwhile is refused as
        # conflicting, so abort only once the commit has ended, or give the producer up
        # (_abort). Short calls let a stop request through between them.
        deadline = time.monotonic() + _COMMIT_WAIT_S
        while True:
            try:
                self.producer.commit_transaction(_WAIT_SLICE_S)
                return
            except KafkaException as e:
                error: KafkaError = e.args[0]
                if (
                    error.retriable()
                    and not error.txn_requires_abort()
                    and time.monotonic() < deadline
                    and not self.stopping()
                ):
                    continue
                raise

    def _abort(self) -> None:
        if self.stopping():
            # No waiting on the broker at a stop: the next run's producer, with the same
            # transactional.id, fences this one and its open transaction is aborted.
            self._discard_producer()
            self._delivery_errors.clear()
            return
        try:
            self.producer.abort_transaction(30.0)
        except KafkaException as e:
            if e.args[0].fatal():
                raise
            # The producer's transaction is in an unknown state (e.g. a commit still under
            # way). A new producer with the same transactional.id fences this one, and the
            # coordinator aborts its open transaction: the retry starts clean.
            log.warning("abort failed (%s); replacing the producer", e.args[0].str())
            self._discard_producer()
        self._delivery_errors.clear()

    def _produce(self, outputs: Outputs) -> None:
        for r in outputs.records:
            self._send(
                r.topic,
                r.key,
                r.value,
                on_delivery=self._on_reported_delivery if r.report_offset else None,
                partition=r.partition,
                timestamp_ms=r.timestamp_ms,
            )
        for rejection in outputs.dead_letters:
            self._send_dead_letter(rejection)

    def _send_dead_letter(self, rejection: Rejection) -> None:
        """A rejected message to the DLQ, cut to what the producer and the topic take
        (dead_letters.py); one that the broker still refuses goes again with its headers alone."""
        source = rejection.message.source
        max_bytes = self.dead_letter_limit.for_message(source)
        on_delivery = partial(self._on_dead_letter_delivery, source)
        try:
            self._send(self.config.dlq_topic, *dead_letter(rejection, max_bytes), on_delivery)
        except OutputFailed as e:
            if e.code not in TOO_LARGE or max_bytes == 0:
                raise
            self.dead_letter_limit.refused(source)
            self._send(self.config.dlq_topic, *dead_letter(rejection, 0), on_delivery)

    def _on_dead_letter_delivery(
        self, source: Source, error: KafkaError | None, message: Message
    ) -> None:
        if error is not None and error.code() in TOO_LARGE:
            self.dead_letter_limit.refused(source)
        self._on_delivery(error, message)

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None = None,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        """Queue one record: every output of every role goes through here."""
        # librdkafka's own choice where these are not given: the partitioner, the time now.
        where: dict[str, Any] = {} if partition is None else {"partition": partition}
        if timestamp_ms is not None:
            where["timestamp"] = timestamp_ms
        record_headers: list[tuple[str, str | bytes | None]] | None = (
            None if headers is None else list(headers)
        )
        while True:
            try:
                self.producer.produce(
                    topic,
                    value=value,
                    key=key,
                    headers=record_headers,
                    on_delivery=on_delivery or self._on_delivery,
                    **where,
                )
                return
            except BufferError:
                self.producer.poll(0.05)  # the local queue is full: let deliveries drain
            except KafkaException as e:
                error: KafkaError = e.args[0]
                if error.fatal() or error.code() in _FENCED:
                    raise
                # e.g. a topic deleted while we run, which librdkafka refuses at once
                raise OutputFailed(error.str(), topic, error.code()) from None

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._delivery_errors.append((error, message.topic() or ""))

    def _on_reported_delivery(self, error: KafkaError | None, message: Message) -> None:
        self._on_delivery(error, message)
        partition, offset = message.partition(), message.offset()
        if error is not None or partition is None or offset is None:  # delivered: has both
            return
        where = (message.topic() or "", partition)
        if offset > self._delivered.get(where, -1):
            self._delivered[where] = offset

    def _delivery_failure(self) -> OutputFailed:
        (error, topic), self._delivery_errors = self._delivery_errors[0], []
        return OutputFailed(error.str(), topic, error.code())

    def _flush(self) -> None:
        deadline = time.monotonic() + self.config_flush_timeout_s
        remaining = self.producer.flush(_WAIT_SLICE_S)
        while remaining and time.monotonic() < deadline and not self.stopping():
            remaining = self.producer.flush(_WAIT_SLICE_S)
        if self._delivery_errors:
            raise self._delivery_failure()
        if remaining:
            raise OutputFailed(f"{remaining} records still undelivered")

    # librdkafka retries inside message.timeout.ms (5 min by default); flush waits that long at
    # most, so a broker outage pauses the loop instead of failing the batch.
    config_flush_timeout_s = 330.0

    def _commit_offsets(self, offsets: Sequence[TopicPartition]) -> None:
        try:
            self.consumer.commit(offsets=list(offsets), asynchronous=False)
        except KafkaException as e:
            # The partitions moved to another member during the batch: it will re-deliver,
            # and the article table answers those articles identically.
            log.warning("offset commit failed (%s); the new owner re-delivers", e.args[0].str())
