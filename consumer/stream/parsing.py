"""Feed messages → articles: decoding, validation and event time, with a reason for every reject.

Pure functions (bytes in, `Article` or `Invalid` out) so they run in the worker processes and in
`newsdedup check` alike. Rejected messages go to the dead-letter topic under `Invalid.reason`.
"""

from __future__ import annotations

import json

from consumer.config import InputConfig
from consumer.records import Article, Invalid, InvalidReason
from consumer.timetext import parse_event_time_ms

MAX_ID_CHARS = 512


def parse_article(
    value: bytes | None, fallback_time_ms: int, fields: InputConfig
) -> Article | Invalid:
    """Decode one feed message; `fallback_time_ms` (the Kafka timestamp) stands in for a
    missing published_at."""
    if value is None:
        return Invalid(InvalidReason.NOT_JSON, "message has no value (tombstone)")
    if len(value) > fields.max_message_bytes:
        return Invalid(
            InvalidReason.TOO_LARGE,
            f"{len(value)} bytes, limit is {fields.max_message_bytes} ([input] max_message_bytes)",
        )
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as e:
        return Invalid(InvalidReason.NOT_UTF8, f"invalid UTF-8 at byte {e.start}")
    try:
        obj = json.loads(text)
    except RecursionError:
        return Invalid(InvalidReason.NOT_JSON, "JSON nested too deeply")
    except ValueError as e:
        return Invalid(InvalidReason.NOT_JSON, str(e)[:200])
    if not isinstance(obj, dict):
        return Invalid(
            InvalidReason.NOT_OBJECT, f"expected a JSON object, got {type(obj).__name__}"
        )
    return _article_from_object(obj, fallback_time_ms, fields)


def _article_from_object(
    obj: dict, fallback_time_ms: int, fields: InputConfig
) -> Article | Invalid:
    article_id = obj.get(fields.id_field)
    if article_id is None or article_id == "":
        return Invalid(InvalidReason.MISSING_ID, f"field {fields.id_field!r} is missing or empty")
    if not isinstance(article_id, str):
        return Invalid(
            InvalidReason.BAD_FIELD_TYPE,
            f"field {fields.id_field!r} must be a string, got {type(article_id).__name__}",
        )
    if not article_id.strip():
        return Invalid(InvalidReason.MISSING_ID, f"field {fields.id_field!r} is blank")
    if len(article_id) > MAX_ID_CHARS:
        return Invalid(
            InvalidReason.BAD_FIELD_TYPE,
            f"field {fields.id_field!r} is longer than {MAX_ID_CHARS} characters",
        )
    try:
        # JSON may escape a lone surrogate ("\ud800"), which no UTF-8 key or record can hold.
        article_id.encode("utf-8")
    except UnicodeEncodeError as e:
        return Invalid(
            InvalidReason.BAD_FIELD_TYPE,
            f"field {fields.id_field!r} is not valid Unicode text "
            f"(a lone surrogate at character {e.start})",
        )
    strings: dict[str, str | None] = {}
    for name in (
        fields.title_field,
        fields.content_field,
        fields.url_field,
        fields.source_field,
        fields.lang_field,
    ):
        v = obj.get(name)
        if v is not None and not isinstance(v, str):
            return Invalid(
                InvalidReason.BAD_FIELD_TYPE,
                f"field {name!r} must be a string, got {type(v).__name__}",
            )
        strings[name] = v
    title = strings[fields.title_field] or ""
    content = strings[fields.content_field] or ""
    if not title.strip() and not content.strip():
        return Invalid(
            InvalidReason.EMPTY_TEXT,
            f"both {fields.title_field!r} and {fields.content_field!r} are empty",
        )
    published = obj.get(fields.published_at_field)
    if published is None or published == "":
        event_time_ms = fallback_time_ms
    else:
        try:
            event_time_ms = parse_event_time_ms(published)
        except ValueError as e:
            return Invalid(InvalidReason.BAD_PUBLISHED_AT, f"{fields.published_at_field!r}: {e}")
    return Article(
        id=article_id,
        title=title,
        content=content,
        event_time_ms=event_time_ms,
        url=strings[fields.url_field],
        source=strings[fields.source_field],
        lang=strings[fields.lang_field],
        dated=published is not None and published != "",
    )
