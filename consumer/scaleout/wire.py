"""Byte layouts of the records on the two topics the roles own, and nobody else slices them.

Internal topic (fingerprint → decide), key = the dedup domain (UTF-8), value:

    >B  version (4)
    >Q  simhash            >q  event time ms        16s content hash
    >i  source partition   >q  source offset        >H  source topic length, >H  id length
    >I  text characters    >H  sketch length        >B  flags (1: the article had no date)
    >H  bands length       >I  shingles length
    source topic (UTF-8), article id (UTF-8), sketch (consumer/fingerprint/sketch.py),
    bands, shingles (`Analyzed.bands`, `Analyzed.shingles`)

Version 4 added the bands and shingles, so the decide role finds and verifies candidates with
the same data `--role all` has. Version 3 is version 4 without its last two lengths and
fields, and reads with empty bands and shingles (an older fingerprint instance during an
upgrade: its articles are decided as that build decided them). Version 3 added the flags: an
undated article's event time is only its record's timestamp, which must neither order it nor
be stored as its date (the decide role gives it the stream's time, as `--role all` does).
Version 2 records (version 3 without the flags) still read, as dated.

Changelog topic (decide → itself after a move), key = domain, 0x00, article id (UTF-8), so
compaction keeps each article's latest record per domain; value:

    >B  version (3)
    >Q  simhash            16s content hash         >q  event time ms
    >I  payload length     >H  sketch length
    payload (the stored decision, consumer/deciding/stored.py), sketch

Version 3 carries the decision as the index keeps it, in the service's own payload. Version 2
held the decision's fields in fixed places:

    >B  version (2)
    >Q  simhash            16s content hash         >q  event time ms
    >B  decision index     >b  distance (-1: none)  >B  late
    >H  cluster id length  >H  matched id length (0xFFFF: none)   >I  payload length
    >H  sketch length
    cluster id, matched id (UTF-8), payload (processed_at, corrected ids), sketch

A compacted changelog keeps an article's version-2 record until the article is decided again,
so this build still reads them, converted as the index converts its own records of that time
(`stored.from_legacy`). Version 1 records are refused: they had no verification sketch, and a
restore from them would verify nothing.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from consumer.deciding import stored
from consumer.deciding.article import Analyzed
from consumer.deciding.decision import Source
from indexstore import ArticleRecord, LegacyDecision, RecordColumns

_VERSION = 3  # of changelog records
_LEGACY_VERSION = 2
_INTERNAL_VERSION = 4
_INTERNAL = struct.Struct(">BQq16siqHHIHBHI")
# The head of each internal record version this build reads, by version.
_INTERNAL_LAYOUTS = {
    2: struct.Struct(">BQq16siqHHIH"),
    3: struct.Struct(">BQq16siqHHIHB"),
    _INTERNAL_VERSION: _INTERNAL,
}
_UNDATED = 0x01
_CHANGE = struct.Struct(">BQ16sqIH")
# _CHANGE as one numpy record, for reading the heads of many records at once.
_CHANGE_HEADS = np.dtype(
    [
        ("version", "u1"),
        ("simhash", ">u8"),
        ("content_hash", "V16"),
        ("event_time", ">i8"),
        ("payload_len", ">u4"),
        ("sketch_len", ">u2"),
    ]
)
_LEGACY_CHANGE = struct.Struct(">BQ16sqBbBHHIH")
_NO_MATCH = 0xFFFF
# The kinds as version 2 numbered them.
_LEGACY_KINDS = ("unique", "duplicate", "near_duplicate")


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
    source: Source  # the feed message, so decisions name it (the decision's `source`)


def encode_fingerprinted(item: Analyzed, source: Source) -> bytes:
    topic = source.topic.encode("utf-8")
    article_id = item.id.encode("utf-8")
    head = _INTERNAL.pack(
        _INTERNAL_VERSION,
        item.simhash,
        item.event_time_ms,
        item.content_hash,
        source.partition,
        source.offset,
        len(topic),
        len(article_id),
        item.text_chars,
        len(item.sketch),
        0 if item.dated else _UNDATED,
        len(item.bands),
        len(item.shingles),
    )
    return b"".join((head, topic, article_id, item.sketch, item.bands, item.shingles))


def decode_fingerprinted(key: bytes | None, value: bytes) -> Fingerprinted:
    layout = _INTERNAL_LAYOUTS.get(value[0] if value else -1, _INTERNAL)
    try:
        (
            version,
            simhash,
            event_ms,
            chash,
            partition,
            offset,
            n_topic,
            n_id,
            chars,
            n_sketch,
            *more,
        ) = layout.unpack_from(value)
    except struct.error as e:
        raise WireError(f"internal record too short: {e}") from None
    if version not in _INTERNAL_LAYOUTS:
        raise WireError(
            f"internal record version {version}, this build reads 2 to {_INTERNAL_VERSION}"
        )
    flags, n_bands, n_shingles = (*more, 0, 0, 0)[:3]
    start = layout.size
    topic = value[start : start + n_topic].decode("utf-8")
    article_id = value[start + n_topic : start + n_topic + n_id].decode("utf-8")
    start += n_topic + n_id
    sketch = value[start : start + n_sketch]
    start += n_sketch
    bands = value[start : start + n_bands]
    start += n_bands
    shingles = value[start : start + n_shingles]
    return Fingerprinted(
        domain=(key or b"").decode("utf-8"),
        item=Analyzed(
            article_id,
            event_ms,
            simhash,
            chash,
            sketch,
            bands,
            shingles,
            chars,
            dated=not flags & _UNDATED,
        ),
        source=Source(topic, partition, offset),
    )


def change_key(domain: str, article_id: str) -> bytes:
    return domain.encode("utf-8") + b"\0" + article_id.encode("utf-8")


def encode_change(record: ArticleRecord) -> bytes:
    head = _CHANGE.pack(
        _VERSION,
        record.simhash,
        record.content_hash,
        record.event_time_ms,
        len(record.payload),
        len(record.sketch),
    )
    return head + record.payload + record.sketch


def decode_change(key: bytes, value: bytes) -> tuple[str, ArticleRecord]:
    """(domain, record) of one changelog record."""
    domain, record = _decode_change_row(key, value)
    return domain.decode("utf-8"), record


def decode_changes(
    keys: Sequence[bytes], values: Sequence[bytes]
) -> dict[str, tuple[list[int], RecordColumns]]:
    """Many changelog records by domain: the positions of each domain's records in the input
    and the records themselves as columns. The fixed heads are read by numpy for all records
    at once, so only the bytes are sliced record by record."""
    n = len(values)
    if not n:
        return {}
    size = _CHANGE.size
    joined = b"".join([v[:size] for v in values])
    if len(joined) != n * size:
        short = next(len(v) for v in values if len(v) < size)
        raise WireError(f"changelog record too short: {short} bytes, the header alone is {size}")
    heads = np.frombuffer(joined, dtype=_CHANGE_HEADS)
    split = [k.partition(b"\0") for k in keys]
    if not all(sep for _, sep, _ in split):
        key = next(k for k, (_, sep, _) in zip(keys, split, strict=True) if not sep)
        raise WireError(f"changelog key {key!r} has no domain separator")
    columns: tuple[list, ...]
    if (heads["version"] != _VERSION).any():
        # Records from before an upgrade, mixed with new ones: the rare case, one by one.
        rows = [_decode_change_row(k, v)[1] for k, v in zip(keys, values, strict=True)]
        columns = tuple(
            [getattr(r, f.name) for r in rows] for f in dataclasses.fields(ArticleRecord)
        )
    else:
        payload_end = size + heads["payload_len"].astype(np.int64)
        sketch_end = payload_end + heads["sketch_len"].astype(np.int64)
        payload_end, sketch_end = payload_end.tolist(), sketch_end.tolist()
        columns = (
            [i.decode("utf-8") for _, _, i in split],
            heads["simhash"].tolist(),
            heads["content_hash"].tolist(),
            heads["event_time"].tolist(),
            [v[size:e] for v, e in zip(values, payload_end, strict=True)],
            [v[a:e] for v, a, e in zip(values, payload_end, sketch_end, strict=True)],
            [b""] * n,
            [b""] * n,
        )
    domains = [d for d, _, _ in split]
    if domains.count(domains[0]) == n:  # the usual case: one domain per partition
        return {domains[0].decode("utf-8"): (list(range(n)), RecordColumns(*columns))}
    positions: dict[bytes, list[int]] = {}
    for i, domain in enumerate(domains):
        positions.setdefault(domain, []).append(i)
    return {
        domain.decode("utf-8"): (at, RecordColumns(*([c[i] for i in at] for c in columns)))
        for domain, at in positions.items()
    }


def _decode_change_row(key: bytes, value: bytes) -> tuple[bytes, ArticleRecord]:
    """(domain, record) of one changelog record of either version."""
    domain, sep, raw_id = key.partition(b"\0")
    if not sep:
        raise WireError(f"changelog key {key!r} has no domain separator")
    article_id = raw_id.decode("utf-8")
    if value[:1] == bytes([_LEGACY_VERSION]):
        return domain, _decode_legacy_change(article_id, value)
    try:
        version, simhash, chash, event_ms, n_payload, n_sketch = _CHANGE.unpack_from(value)
    except struct.error as e:
        raise WireError(f"changelog record too short: {e}") from None
    if version != _VERSION:
        raise WireError(
            f"changelog record version {version}, this build reads {_LEGACY_VERSION} and {_VERSION}"
        )
    i = _CHANGE.size
    payload = value[i : i + n_payload]
    sketch = value[i + n_payload : i + n_payload + n_sketch]
    return domain, ArticleRecord(article_id, simhash, chash, event_ms, payload, sketch)


def _decode_legacy_change(article_id: str, value: bytes) -> ArticleRecord:
    """A version-2 record, its decision turned into the service's payload."""
    try:
        (
            _,
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
        ) = _LEGACY_CHANGE.unpack_from(value)
    except struct.error as e:
        raise WireError(f"changelog record too short: {e}") from None
    if kind >= len(_LEGACY_KINDS):
        raise WireError(f"changelog record of {article_id!r} has decision index {kind}")
    i = _LEGACY_CHANGE.size
    cluster = value[i : i + n_cluster].decode("utf-8")
    i += n_cluster
    matched = None
    if n_matched != _NO_MATCH:
        matched = value[i : i + n_matched].decode("utf-8")
        i += n_matched
    legacy = LegacyDecision(
        article_id=article_id,
        cluster_id=cluster,
        decision=_LEGACY_KINDS[kind],
        matched_id=matched,
        distance=None if distance < 0 else distance,
        late=late == 1,
        payload=value[i : i + n_payload],
    )
    sketch = value[i + n_payload : i + n_payload + n_sketch]
    return ArticleRecord(article_id, simhash, chash, event_ms, stored.from_legacy(legacy), sketch)
