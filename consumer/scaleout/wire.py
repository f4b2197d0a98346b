"""Byte layouts of the records on the two topics the roles own, and nobody else slices them.

Internal topic (fingerprint → decide), key = the dedup domain (UTF-8), value:

    >B  version (4)
    >Q  simhash            >q  event time ms        16s content hash
    >i  source partition   >q  source offset        >H  source topic length, >H  id length
    >I  text characters    >H  sketch length        >B  flags (1: the article had no date)
    >H  bands length       >I  shingles length
    source topic (UTF-8), article id (UTF-8), sketch (consumer/fingerprint/sketch.py),
    bands, shingles (`Analyzed.bands`, `Analyzed.shingles`)

The bands and shingles are there so the decide role finds and verifies candidates with the
same data `--role all` has. An undated article's event time is only its record's timestamp,
which must neither order it nor be stored as its date (the decide role gives it the stream's
time, as `--role all` does): the flag says so.

Changelog topic (decide → itself after a move), key = domain, 0x00, article id (UTF-8), so
compaction keeps each article's latest record per domain; value:

    >B  version (4)
    >Q  simhash            16s content hash         >q  event time ms
    >I  payload length     >H  sketch length        >H  bands length   >I  shingles length
    payload (the stored decision, consumer/deciding/stored.py), sketch, bands, shingles

The record is the one the index keeps (`ArticleRecord`, bands and shingles included), so a
restored index finds and verifies candidates as the one that wrote it.

Records of another version, on either topic, are refused (`WireError`): no release wrote any
other. A release that changes a layout must still read the one before it: a compacted
changelog keeps an article's record until the article is decided again, and fingerprint
instances of the previous release may run during an upgrade.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from consumer.records import Analyzed, Source
from indexstore import ArticleRecord, RecordColumns

_VERSION = 4  # of changelog records
_INTERNAL_VERSION = 4
_INTERNAL = struct.Struct(">BQq16siqHHIHBHI")
_UNDATED = 0x01
_CHANGE = struct.Struct(">BQ16sqIHHI")
# _CHANGE as one numpy record, for reading the heads of many records at once.
_CHANGE_HEAD = np.dtype(
    [
        ("version", "u1"),
        ("simhash", ">u8"),
        ("content_hash", "V16"),
        ("event_time", ">i8"),
        ("payload_len", ">u4"),
        ("sketch_len", ">u2"),
        ("bands_len", ">u2"),
        ("shingles_len", ">u4"),
    ]
)
# The lengths of the variable fields after the payload, in the order the fields follow it.
_VARIABLE_LENGTHS = ("sketch_len", "bands_len", "shingles_len")


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
            flags,
            n_bands,
            n_shingles,
        ) = _INTERNAL.unpack_from(value)
    except struct.error as e:
        raise WireError(f"internal record too short: {e}") from None
    if version != _INTERNAL_VERSION:
        raise WireError(f"internal record version {version}, this build reads {_INTERNAL_VERSION}")
    start = _INTERNAL.size
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


def decode_changes(
    keys: Sequence[bytes], values: Sequence[bytes]
) -> dict[str, tuple[list[int], RecordColumns]]:
    """Many changelog records by domain: the positions of each domain's records in the input
    and the records themselves as columns. The fixed heads are read by numpy for all records
    at once, so only the bytes are sliced record by record."""
    n = len(values)
    if not n:
        return {}
    split = [k.partition(b"\0") for k in keys]
    if not all(sep for _, sep, _ in split):
        key = next(k for k, (_, sep, _) in zip(keys, split, strict=True) if not sep)
        raise WireError(f"changelog key {key!r} has no domain separator")
    columns = ([i.decode("utf-8") for _, _, i in split], *_after_id(values, _read_heads(values)))
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


def _read_heads(values: Sequence[bytes]) -> np.ndarray:
    """The heads of the records, refused unless every one is of this version."""
    size = _CHANGE_HEAD.itemsize
    joined = b"".join([v[:size] for v in values])
    if len(joined) != len(values) * size:
        short = min(map(len, values))
        raise WireError(f"changelog record too short: {short} bytes, the head alone is {size}")
    heads = np.frombuffer(joined, dtype=_CHANGE_HEAD)
    other = heads["version"][heads["version"] != _VERSION]
    if len(other):
        raise WireError(f"changelog record version {other[0]}, this build reads {_VERSION}")
    return heads


def _after_id(values: Sequence[bytes], heads: np.ndarray) -> tuple[list, ...]:
    """The columns of the records after the id, in `ArticleRecord` order."""
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
    for name in _VARIABLE_LENGTHS:
        length = heads[name]
        if not length.any():  # none has this field (e.g. articles decided without shingles)
            variable.append([b""] * n)
            continue
        start, end = end, end + length
        variable.append(
            [v[a:e] for v, a, e in zip(values, start.tolist(), end.tolist(), strict=True)]
        )
    return (*fixed, *variable)
