"""Dead-letter sizing: how a rejected message is fitted into a dead letter that both the
producer and the DLQ topic take.

Why: a message the broker delivered can be as large as the broker's own limit, and its dead
letter repeats it and adds the error headers. Were that refused, the message could never leave
and would stop its partition for good. So the dead letter keeps the message's key, value and
headers when they fit, and otherwise cuts the value (headers say how long it was and its
SHA-256); one the broker refuses anyway is sent again with its headers alone. The commit
protocol (checkpoint.py) sends them, as step 2.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import final

from confluent_kafka import KafkaError

from consumer.records import Rejection, Source

# librdkafka's default message.max.bytes: a record whose key, value and headers pass it is
# refused by produce() before it is sent.
_PRODUCER_MAX_BYTES = 1_000_000
# Room left in a dead letter for the framing both librdkafka and the broker count against the
# limit (record and batch headers, varints): a few dozen bytes, with a wide margin.
_FRAMING_BYTES = 1_024
# The broker refused one record for its size: no retry of the same record can succeed.
TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})

DeadLetter = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]  # key, value, headers


@final
class DeadLetterLimit:
    """How many bytes a message's dead letter may take: what both the producer and the DLQ
    topic take, or none (headers alone) once the broker refused that message's dead letter."""

    def __init__(self, client: Mapping[str, str]) -> None:
        # The largest dead letter both the producer and the DLQ topic take (limit_to_topic).
        self.max_bytes = int(client.get("message.max.bytes", _PRODUCER_MAX_BYTES)) - _FRAMING_BYTES
        # Dead letters the broker refused for their size: sent again with no value.
        self._refused: set[Source] = set()

    def limit_to_topic(self, topic_max_bytes: int | None) -> None:
        """Cut dead letters to the DLQ topic's own `max.message.bytes` too, when it is known."""
        if topic_max_bytes is not None:
            self.max_bytes = min(self.max_bytes, topic_max_bytes - _FRAMING_BYTES)

    def for_message(self, source: Source) -> int:
        return 0 if source in self._refused else self.max_bytes

    def refused(self, source: Source) -> None:
        """The broker refused the dead letter of `source` for its size."""
        self._refused.add(source)


def dlq_headers(rejection: Rejection) -> list[tuple[str, bytes]]:
    """Why and where from: the headers every dead letter carries."""
    source = rejection.message.source
    return [
        ("x-error-reason", str(rejection.invalid.reason).encode()),
        ("x-error-detail", rejection.invalid.detail.encode("utf-8", errors="replace")[:1000]),
        ("x-source-topic", source.topic.encode()),
        ("x-source-partition", str(source.partition).encode()),
        ("x-source-offset", str(source.offset).encode()),
    ]


def dead_letter(rejection: Rejection, max_bytes: int) -> DeadLetter:
    """Key, value and headers of the dead letter of `rejection`, at most `max_bytes` together.

    The message's own headers come first and its value whole when they fit. Otherwise the value
    is cut to what fits and `x-error-value-truncated`, `-bytes` and `-sha256` say what the whole
    was; headers that do not fit even without a value are dropped (`x-error-headers-dropped`).
    """
    message = rejection.message
    key, value = message.key, message.value
    ours = dlq_headers(rejection)
    original = list(message.headers)

    def size(value_bytes: int, headers: list[tuple[str, bytes]]) -> int:
        return len(key or b"") + value_bytes + sum(len(k) + len(v or b"") for k, v in headers)

    if value is None or size(len(value), [*original, *ours]) <= max_bytes:
        return key, value, [*original, *ours]
    ours += [
        ("x-error-value-truncated", b"true"),
        ("x-error-value-bytes", str(len(value)).encode()),
        ("x-error-value-sha256", hashlib.sha256(value).hexdigest().encode()),
    ]
    if size(0, [*original, *ours]) > max_bytes:
        ours.append(("x-error-headers-dropped", str(len(original)).encode()))
        original = []
    if size(0, ours) > max_bytes and key:
        ours.append(("x-error-key-bytes", str(len(key)).encode()))
        key = None
    room = max(max_bytes - size(0, [*original, *ours]), 0)
    return key, value[:room], [*original, *ours]
