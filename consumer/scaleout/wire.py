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

    >B  version (4)
    >Q  simhash            16s content hash         >q  event time ms
    >I  payload length     >H  sketch length        >H  bands length   >I  shingles length
    payload (the stored decision, consumer/deciding/stored.py), sketch, bands, shingles

Version 4 added the bands and shingles (`ArticleRecord.bands`, `.shingles`), so a restored
index finds and verifies candidates as the one that wrote it. Version 3 is version 4 without
the last two lengths and fields; a compacted changelog keeps an article's version-3 record
until the article is decided again, so those read too, with empty bands and shingles (as the
index that wrote them had none); a restore reads them in bulk as it reads version 4, not one
by one.

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

_VERSION = 4  # of changelog records
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
_CHANGE = struct.Struct(">BQ16sqIHHI")
_CHANGE_V3 = struct.Struct(">BQ16sqIH")
_V3 = 3
# The changelog heads as numpy records, for reading the heads of many records at once: the
# versions the bulk decoder reads without a Python call per record.
_HEAD_FIELDS = [
    ("version", "u1"),
    ("simhash", ">u8"),
    ("content_hash", "V16"),
    ("event_time", ">i8"),
    ("payload_len", ">u4"),
    ("sketch_len", ">u2"),
]
_CHANGE_HEADS = {
    _VERSION: np.dtype([*_HEAD_FIELDS, ("bands_len", ">u2"), ("shingles_len", ">u4")]),
    _V3: np.dtype(_HEAD_FIELDS),
}
# The lengths of the variable fields after the payload, in the order the fields follow it.
_VARIABLE_LENGTHS = {_VERSION: ("sketch_len", "bands_len", "shingles_len"), _V3: ("sketch_len",)}
# The columns of a record after its id, in `ArticleRecord` (and `RecordColumns`) order.
_AFTER_ID = tuple(f.name for f in dataclasses.fields(ArticleRecord))[1:]
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
            bands=bands,
            shingles=shingles,
            text_chars=chars,
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
        len(record.bands),
        len(record.shingles),
    )
    return b"".join((head, record.payload, record.sketch, record.bands, record.shingles))


def decode_change(key: bytes, value: bytes) -> tuple[str, ArticleRecord]:
    """(domain, record) of one changelog record."""
    domain, record = _decode_change_row(key, value)
    return domain.decode("utf-8"), record


def decode_changes(
    keys: Sequence[bytes], values: Sequence[bytes]
) -> dict[str, tuple[list[int], RecordColumns]]:
    """Many changelog records by domain: the positions of each domain's records in the input
    and the records themselves as columns. The fixed heads are read by numpy for all records
    of a version at once, so only the bytes are sliced record by record."""
    n = len(values)
    if not n:
        return {}
    split = [k.partition(b"\0") for k in keys]
    if not all(sep for _, sep, _ in split):
        key = next(k for k, (_, sep, _) in zip(keys, split, strict=True) if not sep)
        raise WireError(f"changelog key {key!r} has no domain separator")
    heads = _read_heads(values, _VERSION)
    if heads is not None and (heads["version"] == _VERSION).all():
        after_id = _after_id(values, heads, _VERSION)
    else:
        after_id = _decode_mixed(keys, values)
    columns = ([i.decode("utf-8") for _, _, i in split], *after_id)
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


def _read_heads(values: Sequence[bytes], version: int) -> np.ndarray | None:
    """The heads of records read as `version`'s, or None if one is too short for its head."""
    heads_type = _CHANGE_HEADS[version]
    joined = b"".join([v[: heads_type.itemsize] for v in values])
    if len(joined) != len(values) * heads_type.itemsize:
        return None
    return np.frombuffer(joined, dtype=heads_type)


def _after_id(values: Sequence[bytes], heads: np.ndarray, version: int) -> tuple[list, ...]:
    """The columns after the id (`_AFTER_ID`) of records all of `version` (3 or 4)."""
    n = len(values)
    fixed = (
        heads["simhash"].tolist(),
        heads["content_hash"].tolist(),
        heads["event_time"].tolist(),
    )
    size = heads.dtype.itemsize
    # The payload starts right after the head: one slice bound per record fewer to pass.
    end = size + heads["payload_len"].astype(np.int64)
    variable = [[v[size:e] for v, e in zip(values, end.tolist(), strict=True)]]
    for name in _VARIABLE_LENGTHS[version]:
        length = heads[name]
        if not length.any():  # none has this field (e.g. records of a build without bands)
            variable.append([b""] * n)
            continue
        start, end = end, end + length
        variable.append(
            [v[a:e] for v, a, e in zip(values, start.tolist(), end.tolist(), strict=True)]
        )
    variable += ([b""] * n for _ in range(len(_AFTER_ID) - len(fixed) - len(variable)))
    return (*fixed, *variable)


def _decode_mixed(keys: Sequence[bytes], values: Sequence[bytes]) -> list[list]:
    """`_after_id` of records of several versions (for a while after an upgrade): each
    version's records read together, those of version 2 (or refused ones) one by one."""
    n = len(values)
    columns: list[list] = [[None] * n for _ in _AFTER_ID]
    versions = b"".join([v[:1] for v in values])
    if len(versions) != n:
        raise WireError("changelog record too short: 0 bytes")
    of_version = np.frombuffer(versions, dtype=np.uint8)
    for version in np.unique(of_version).tolist():
        at = np.flatnonzero(of_version == version).tolist()
        mine = [values[i] for i in at]
        heads = _read_heads(mine, version) if version in _CHANGE_HEADS else None
        if heads is not None:
            part = _after_id(mine, heads, version)
        else:
            rows = [_decode_change_row(keys[i], values[i])[1] for i in at]
            part = tuple([getattr(r, name) for r in rows] for name in _AFTER_ID)
        for column, decoded in zip(columns, part, strict=True):
            for i, x in zip(at, decoded, strict=True):
                column[i] = x
    return columns


def _decode_change_row(key: bytes, value: bytes) -> tuple[bytes, ArticleRecord]:
    """(domain, record) of one changelog record of any version this build reads."""
    domain, sep, raw_id = key.partition(b"\0")
    if not sep:
        raise WireError(f"changelog key {key!r} has no domain separator")
    article_id = raw_id.decode("utf-8")
    version = value[0] if value else None
    if version == _LEGACY_VERSION:
        return domain, _decode_legacy_change(article_id, value)
    layout = _CHANGE_V3 if version == _V3 else _CHANGE
    try:
        version, simhash, chash, event_ms, n_payload, n_sketch, *more = layout.unpack_from(value)
    except struct.error as e:
        raise WireError(f"changelog record too short: {e}") from None
    if version not in (_V3, _VERSION):
        raise WireError(
            f"changelog record version {version}, this build reads {_LEGACY_VERSION} to {_VERSION}"
        )
    n_bands, n_shingles = more or (0, 0)
    i = layout.size
    payload = value[i : i + n_payload]
    i += n_payload
    sketch = value[i : i + n_sketch]
    i += n_sketch
    bands = value[i : i + n_bands]
    shingles = value[i + n_bands : i + n_bands + n_shingles]
    return domain, ArticleRecord(
        article_id, simhash, chash, event_ms, payload, sketch, bands, shingles
    )


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
