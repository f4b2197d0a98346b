"""Decision messages match the JSON Schema shipped in config/schemas."""

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.records import Decision, DecisionKind, Source

SCHEMAS = Path(__file__).resolve().parents[2] / "config" / "schemas"


def schema(name):
    return json.loads((SCHEMAS / name).read_text())


def decision(**overrides):
    fields = dict(
        id="qq-77",
        decision=DecisionKind.NEAR_DUPLICATE,
        cluster_id="sina-1",
        matched_id="sina-1",
        distance=2,
        simhash=0x9F3C0A17D2B4E881,
        content_hash=bytes(range(16)),
        event_time_ms=1_763_776_800_000,
        late=False,
        source=Source("news.raw", 3, 1042),
        processed_at_ms=1_763_776_801_120,
    )
    fields.update(overrides)
    return Decision(**fields)


def test_decision_json_matches_the_design_example_shape():
    d = json.loads(decision().to_json())
    assert d["simhash"] == "9f3c0a17d2b4e881"
    assert d["event_time"] == "2025-11-22T02:00:00Z"
    assert d["processed_at"] == "2025-11-22T02:00:01.120Z"
    assert d["source"] == {"topic": "news.raw", "partition": 3, "offset": 1042}
    jsonschema.validate(d, schema("decision.schema.json"))


@settings(max_examples=500)
@given(
    st.builds(
        Decision,
        id=st.text(),
        decision=st.sampled_from(DecisionKind),
        cluster_id=st.text(),
        matched_id=st.none() | st.text(),
        distance=st.none() | st.integers(0, 64),
        simhash=st.integers(0, 2**64 - 1),
        content_hash=st.binary(min_size=16, max_size=16),
        event_time_ms=st.integers(0, 7_258_118_399_999),
        late=st.booleans(),
        source=st.builds(Source, st.text(), st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)),
        processed_at_ms=st.integers(0, 7_258_118_399_999),
        correction=st.booleans(),
    )
)
def test_the_json_is_what_the_generic_encoder_writes_of_the_dict(d):
    """`to_json` writes its text directly: byte for byte what json.dumps makes of `to_dict`,
    for any text in the ids and the topic (quotes, control characters, any script)."""
    assert d.to_json() == json.dumps(d.to_dict(), ensure_ascii=False, separators=(",", ":"))


def test_unique_and_duplicate_validate():
    unique = decision(
        decision=DecisionKind.UNIQUE, cluster_id="qq-77", matched_id=None, distance=None
    )
    dup = decision(decision=DecisionKind.DUPLICATE, distance=0)
    for d in (unique, dup):
        jsonschema.validate(json.loads(d.to_json()), schema("decision.schema.json"))


def test_schema_rejects_inconsistent_decisions():
    bad = json.loads(decision(decision=DecisionKind.UNIQUE).to_json())  # unique with a match
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema("decision.schema.json"))


def test_article_schema_accepts_the_design_example_and_rejects_no_text():
    s = schema("article.schema.json")
    jsonschema.validate(
        {
            "id": "sina-1",
            "title": "t",
            "content": "<p>c</p>",
            "url": "https://x",
            "source": "sina",
            "lang": "zh",
            "published_at": "2026-11-22T10:00:00+08:00",
        },
        s,
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "x", "title": " "}, s)
