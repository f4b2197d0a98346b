"""Byte layouts of the records on the two topics the roles own, and nobody else slices them.

Internal topic (fingerprint → decide), key = the dedup domain (UTF-8), value:

    >B  version (2)
    >Q  simhash            >q  event time ms        16s content hash
    >i  source partition   >q  source offset        >H  source topic length, >H  id length
    >I  text characters    >H  sketch length
    source topic (UTF-8), article id (UTF-8), sketch (consumer/sketch.py)

Changelog topic (decide → itself after a move), key = domain, 0x00, article id (UTF-8), so
compaction keeps each article's latest record per domain; value:

    >B  version (2)
    >Q  simhash            16s content hash         >q  event time ms
    >B  decision index     >b  distance (-1: none)  >B  late
    >H  cluster id length  >H  matched id length (0xFFFF: none)   >I  payload length
    >H  sketch length
    cluster id, matched id (UTF-8), payload, sketch

Version 2 added the verification sketch (and the text length that decides the short-text
rule); version 1 records are refused: a restore from them would verify nothing.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from consumer.analysis import Analyzed
from consumer.decisions import DecisionKind, Source
from indexstore import ArticleRecord, RecordColumns

_VERSION = 2
_INTERNAL = struct.Struct(">BQq16siqHHIH")
_CHANGE = struct.Struct(">BQ16sqBbBHHIH")
_NO_MATCH = 0xFFFF
_KIND_VALUES = tuple(kind.value for kind in DecisionKind)
_KIND_INDEX = {value: i for i, value in enumerate(_KIND_VALUES)}


class WireError(ValueError):
    """A record on an internal topic that this version cannot read."""


def domain_partition(domain: str, partitions: int) -> int:
    """The internal (and changelog) partition of a domain: fixed by the name alone, so every
    fingerprint instance sends a domain to the same single writer. CRC-32 is stable across
    processes and versions, unlike Python's salted hash()."""
    return zlib.crc32(domain.encode("utf-8")) % partitions


@dataclass(frozen=True, slots=True)
class Fingerprinted:
    """One valid article as the decide role receives it."""

    domain: str
    item: Analyzed
    source: Source  # the feed message, so decisions name it (DESIGN.md `source`)


def encode_fingerprinted(item: Analyzed, source: Source) -> bytes:
    topic = source.topic.encode("utf-8")
    article_id = item.id.encode("utf-8")
    head = _INTERNAL.pack(
        _VERSION,
        item.simhash,
        item.event_time_ms,
        item.content_hash,
        source.partition,
        source.offset,
        len(topic),
        len(article_id),
        item.text_chars,
        len(item.sketch),
    )
    return head + topic + article_id + item.sketch


def decode_fingerprinted(key: bytes | None, value: bytes) -> Fingerprinted:
    try:
        version, simhash, event_ms, chash, partition, offset, n_topic, n_id, chars, n_sketch = (
            _INTERNAL.unpack_from(value)
        )
    except struct.error as e:
        raise WireError(f"internal record too short: {e}") from None
    if version != _VERSION:
        raise WireError(f"internal record version {version}, this build reads {_VERSION}")
    start = _INTERNAL.size
    topic = value[start : start + n_topic].decode("utf-8")
    article_id = value[start + n_topic : start + n_topic + n_id].decode("utf-8")
    start += n_topic + n_id
    sketch = value[start : start + n_sketch]
    return Fingerprinted(
        domain=(key or b"").decode("utf-8"),
        item=Analyzed(article_id, event_ms, simhash, chash, sketch, chars),
        source=Source(topic, partition, offset),
    )


def change_key(domain: str, article_id: str) -> bytes:
    return domain.encode("utf-8") + b"\0" + article_id.encode("utf-8")


def encode_change(record: ArticleRecord) -> bytes:
    cluster = record.cluster_id.encode("utf-8")
    matched = b"" if record.matched_id is None else record.matched_id.encode("utf-8")
    head = _CHANGE.pack(
        _VERSION,
        record.simhash,
        record.content_hash,
        record.event_time_ms,
        _KIND_INDEX[record.decision],
        -1 if record.distance is None else record.distance,
        record.late,
        len(cluster),
        _NO_MATCH if record.matched_id is None else len(matched),
        len(record.payload),
        len(record.sketch),
    )
    return head + cluster + matched + record.payload + record.sketch


def decode_change(key: bytes, value: bytes) -> tuple[str, ArticleRecord]:
    """(domain, record) of one changelog record."""
    domain, row = _decode_change_row(key, value)
    return domain.decode("utf-8"), ArticleRecord(*row)


def decode_changes(
    keys: Sequence[bytes], values: Sequence[bytes]
) -> dict[str, tuple[list[int], RecordColumns]]:
    """Many changelog records by domain: the positions of each domain's records in the input
    and the records themselves as columns, without an `ArticleRecord` per record."""
    rows: dict[bytes, tuple[list[int], list[tuple]]] = {}
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        domain, row = _decode_change_row(key, value)
        found = rows.get(domain)
        if found is None:
            found = rows[domain] = ([], [])
        found[0].append(i)
        found[1].append(row)
    return {
        domain.decode("utf-8"): (at, RecordColumns(*(list(c) for c in zip(*records, strict=True))))
        for domain, (at, records) in rows.items()
    }


def _decode_change_row(key: bytes, value: bytes) -> tuple[bytes, tuple]:
    """(domain, the record's fields in `ArticleRecord` order) of one changelog record."""
    domain, sep, article_id = key.partition(b"\0")
    try:
        (
            version,
            simhash,
            chash,
            event_ms,
            kind,
            distance,
            late,
            n_cluster,
            n_matched,
            n_payload,
            n_sketch,
        ) = _CHANGE.unpack_from(value)
    except struct.error as e:
        raise WireError(f"changelog record too short: {e}") from None
    if version != _VERSION or not sep:
        raise WireError(f"changelog record version {version} or key {key!r} not readable")
    i = _CHANGE.size
    cluster = value[i : i + n_cluster].decode("utf-8")
    i += n_cluster
    matched = None
    if n_matched != _NO_MATCH:
        matched = value[i : i + n_matched].decode("utf-8")
        i += n_matched
    return domain, (
        article_id.decode("utf-8"),
        simhash,
        chash,
        event_ms,
        cluster,
        _KIND_VALUES[kind],
        matched,
        None if distance < 0 else distance,
        late == 1,
        value[i : i + n_payload],
        value[i + n_payload : i + n_payload + n_sketch],
    )
