"""The records of the feed as the service handles them: a message read (`Message`), the article
parsed from it (`Article`), or why it was refused (`Invalid`, `InvalidReason`) and the
rejection that carries it to the dead-letter topic (`Rejection`).
"""

from __future__ import annotations

from enum import StrEnum

from consumer.records.decision import Source
from indexstore.value import value_type


class InvalidReason(StrEnum):
    TOO_LARGE = "too_large"
    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    MISSING_ID = "missing_id"
    BAD_FIELD_TYPE = "bad_field_type"
    EMPTY_TEXT = "empty_text"
    BAD_PUBLISHED_AT = "bad_published_at"
    INTERNAL_ERROR = "internal_error"


@value_type
class Article:
    id: str
    title: str
    content: str
    event_time_ms: int
    url: str | None = None
    source: str | None = None
    lang: str | None = None
    dated: bool = True  # False: no published_at, event_time_ms is the fallback


@value_type
class Invalid:
    reason: InvalidReason
    detail: str


@value_type
class Message:
    """One input message, from Kafka or from a line of a file."""

    key: bytes | None
    value: bytes | None
    source: Source
    timestamp_ms: int  # stands in for a missing published_at
    headers: tuple[tuple[str, bytes], ...] = ()


@value_type
class Rejection:
    message: Message
    invalid: Invalid
