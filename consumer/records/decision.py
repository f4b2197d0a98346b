"""The decision message: one per article, published to the output topic (schema in config/)."""

from __future__ import annotations

import json
from enum import StrEnum

from consumer.timetext import format_time_ms
from indexstore.value import value_type

SCHEMA_VERSION = 1


class DecisionKind(StrEnum):
    UNIQUE = "unique"  # starts a cluster
    DUPLICATE = "duplicate"  # same normalized text as an earlier article
    NEAR_DUPLICATE = "near_duplicate"  # shares enough shingles with an earlier one (rules.py)


@value_type
class Source:
    """Where the decided message came from: a Kafka position, or a file and line in `check`."""

    topic: str
    partition: int
    offset: int

    @property
    def position_key(self) -> str:
        return f"{self.topic}/{self.partition}"


# The JSON string of a text, as json.dumps(text, ensure_ascii=False) writes it.
_text = json.encoder.encode_basestring  # type: ignore[attr-defined]
_CORRECTION = ',"correction":true'


@value_type
class Decision:
    """One article's decision, as the output topic carries it (`to_dict`, `to_json`).

    `decision` is unique (the article starts a cluster), duplicate (the same normalized text
    as `matched_id`) or near_duplicate (a copy of `matched_id`, its fingerprint `distance`
    bits away); `cluster_id` is the id of the cluster's first article. `late`: older than the
    window behind the newest article decided, so checked but not indexed. `source` is where
    the article was read; `simhash`, `content_hash` and `event_time_ms` what it was decided
    by."""

    id: str
    decision: DecisionKind
    cluster_id: str
    matched_id: str | None
    distance: int | None
    simhash: int
    content_hash: bytes
    event_time_ms: int
    late: bool
    source: Source
    processed_at_ms: int
    correction: bool = False
    """A decision made again for an article decided before (consumer/deciding/rules.py)."""

    def to_dict(self) -> dict:
        """The message as a dict: the readable definition, which `to_json` writes directly
        (a property test holds the two equal)."""
        record = {
            "id": self.id,
            "decision": self.decision.value,
            "cluster_id": self.cluster_id,
            "matched_id": self.matched_id,
            "distance": self.distance,
            "simhash": f"{self.simhash:016x}",
            "content_hash": self.content_hash.hex(),
            "event_time": format_time_ms(self.event_time_ms),
            "late": self.late,
            "source": {
                "topic": self.source.topic,
                "partition": self.source.partition,
                "offset": self.source.offset,
            },
            "processed_at": format_time_ms(self.processed_at_ms),
            "schema": SCHEMA_VERSION,
        }
        if self.correction:
            record["correction"] = True
        return record

    def to_json(self) -> str:
        """`to_dict()` as compact JSON (no spaces, UTF-8 text unescaped), written directly:
        a dict and the generic encoder cost twice as much, per article `check` decides."""
        source = self.source
        return (
            f'{{"id":{_text(self.id)},"decision":"{self.decision.value}",'
            f'"cluster_id":{_text(self.cluster_id)},'
            f'"matched_id":{"null" if self.matched_id is None else _text(self.matched_id)},'
            f'"distance":{"null" if self.distance is None else int(self.distance)},'
            f'"simhash":"{self.simhash:016x}","content_hash":"{self.content_hash.hex()}",'
            f'"event_time":"{format_time_ms(self.event_time_ms)}",'
            f'"late":{"true" if self.late else "false"},'
            f'"source":{{"topic":{_text(source.topic)},"partition":{int(source.partition)},'
            f'"offset":{int(source.offset)}}},'
            f'"processed_at":"{format_time_ms(self.processed_at_ms)}",'
            f'"schema":{SCHEMA_VERSION}{_CORRECTION if self.correction else ""}}}'
        )

    def to_bytes(self) -> bytes:
        return self.to_json().encode("utf-8")
