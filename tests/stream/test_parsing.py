"""Feed message validation: every reject has a reason; valid articles keep their fields."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.config import InputConfig
from consumer.records import Article, Invalid, InvalidReason
from consumer.stream.parsing import parse_article
from consumer.timetext import format_time_ms, parse_event_time_ms

FIELDS = InputConfig()
KAFKA_TS = 1_700_000_000_000


def parse(obj_or_bytes, fields=FIELDS):
    raw = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
    return parse_article(raw, KAFKA_TS, fields)


def test_valid_article_keeps_fields_and_event_time():
    a = parse(
        {
            "id": "a1",
            "title": "T",
            "content": "C",
            "source": "s",
            "published_at": "2026-11-22T10:00:00+08:00",
            "extra": [1, 2],
        }
    )
    assert isinstance(a, Article)
    assert (a.id, a.title, a.content, a.source) == ("a1", "T", "C", "s")
    assert format_time_ms(a.event_time_ms) == "2026-11-22T02:00:00Z"


def test_missing_published_at_uses_the_kafka_timestamp():
    assert parse({"id": "a1", "content": "C"}).event_time_ms == KAFKA_TS
    assert parse({"id": "a1", "content": "C", "published_at": ""}).event_time_ms == KAFKA_TS


def test_field_names_are_configurable():
    fields = InputConfig(id_field="guid", content_field="body")
    a = parse({"guid": "g", "body": "text"}, fields)
    assert isinstance(a, Article) and a.id == "g" and a.content == "text"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe not utf8", InvalidReason.NOT_UTF8),
        (b"{not json", InvalidReason.NOT_JSON),
        (b"[1, 2]", InvalidReason.NOT_OBJECT),
        ({"title": "t"}, InvalidReason.MISSING_ID),
        ({"id": "", "title": "t"}, InvalidReason.MISSING_ID),
        ({"id": "   ", "title": "t"}, InvalidReason.MISSING_ID),
        ({"id": 7, "title": "t"}, InvalidReason.BAD_FIELD_TYPE),
        ({"id": "a", "title": ["t"]}, InvalidReason.BAD_FIELD_TYPE),
        ({"id": "a", "title": " ", "content": ""}, InvalidReason.EMPTY_TEXT),
        ({"id": "a"}, InvalidReason.EMPTY_TEXT),
        ({"id": "a", "title": "t", "published_at": "yesterday"}, InvalidReason.BAD_PUBLISHED_AT),
        ({"id": "a", "title": "t", "published_at": 10**18}, InvalidReason.BAD_PUBLISHED_AT),
        ({"id": "a", "title": "t", "published_at": True}, InvalidReason.BAD_PUBLISHED_AT),
        (b'{"id": "a", "title": "t", "published_at": NaN}', InvalidReason.BAD_PUBLISHED_AT),
        (b"[" * 100_000, InvalidReason.NOT_JSON),
        (b"x" * (FIELDS.max_message_bytes + 1), InvalidReason.TOO_LARGE),
    ],
)
def test_each_bad_input_has_its_reason(raw, reason):
    result = parse(raw)
    assert isinstance(result, Invalid)
    assert result.reason is reason
    assert result.detail


def test_tombstone_is_rejected():
    assert isinstance(parse_article(None, KAFKA_TS, FIELDS), Invalid)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2022-01-05", "2022-01-05T00:00:00Z"),
        ("2022-01-05T08:30:00", "2022-01-05T08:30:00Z"),
        ("2022-01-05T08:30:00Z", "2022-01-05T08:30:00Z"),
        (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
        ("1700000000123", "2023-11-14T22:13:20.123Z"),
        ("26-FEB-1987 15:14:36.41", "1987-02-26T15:14:36.410Z"),
        ("Tue, 10 Jun 2025 04:00:00 +0200", "2025-06-10T02:00:00Z"),
        ("2022/01/05 08:30:00", "2022-01-05T08:30:00Z"),
        ("2022年1月5日", "2022-01-05T00:00:00Z"),
    ],
)
def test_event_time_formats(value, expected):
    assert format_time_ms(parse_event_time_ms(value)) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(raw):
    assert isinstance(parse_article(raw, KAFKA_TS, FIELDS), Article | Invalid)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["id", "title", "content", "published_at", "url"]), json_values)
)
def test_arbitrary_objects_never_raise(obj):
    raw = json.dumps(obj).encode()
    assert isinstance(parse_article(raw, KAFKA_TS, FIELDS), Article | Invalid)


@settings(max_examples=2000)
@given(st.integers(min_value=0, max_value=parse_event_time_ms("2199-12-31T23:59:59.999Z")))
def test_a_time_is_written_as_datetime_writes_it(ms):
    # The reference: the ISO-8601 text datetime gives, in UTC, milliseconds only when nonzero.
    dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    expected = dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")
    assert format_time_ms(ms) == expected
    assert parse_event_time_ms(format_time_ms(ms)) == ms
