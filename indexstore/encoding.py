"""Every byte layout of the index on disk: column family names, keys and values.

Nobody else builds or slices these bytes. The RocksDB database (raw mode) holds:

column family ``default`` (small, fixed keys)
    b"meta"          -> UTF-8 JSON {"format": 4, "max_distance": k, "segment_ms": ...,
                        "group_ms": ..., "generation_ms": ...}; checked at open
    b"state"         -> >q watermark_ms (INT64_MIN = none) | >Q next_seq | >Q commits
    b"pos:" + KEY    -> >Q next offset to read (KEY: UTF-8, e.g. "news.raw/3")

column family ``group.<gid>`` (the segments of one group; gid = segment id // segments per
group, signed). SEG below is the segment id as >Q of (id + 2**63), so keys sort numerically
and a segment's keys are one contiguous range, dropped with one range deletion.
    b"b" + SEG + >Q commit -> fingerprint blob written by that commit (or merged blobs):
                              <I n | n x <Q simhash | n x <Q seq
    b"r" + SEG + >Q seq    -> article id (UTF-8) of row `seq`

column family ``articles.<gen>`` (article table; gen = storage_time // generation_ms)
    article id (UTF-8) -> record:
        >B version(3) | >Q simhash | 16s content_hash | >q event_time_ms | >Q seq
        (2**64-1: not in the search tables) | >H sketch length | sketch | payload (the rest,
        opaque: the caller's, e.g. the service's decision in consumer/deciding/stored.py)

Format 3 (record version 2) held the decision's own fields in the record: distance, flags
(late, matched id present), the lengths and UTF-8 of decision, cluster id and matched id,
between the head and the sketch (`decode_legacy_record`). Opening a format-3 index for
writing migrates it (indexstore/migration.py). Formats 1 and 2 had a column family per
segment; creating one costs ~80 ms, which dominated replays of history. They are refused
(the index is rebuilt by replaying the feed).

A row is one article's entry in the search tables; `seq` numbers rows in insertion order,
never reused. Blobs are little-endian so numpy reads them without copying; keys are
big-endian so they sort numerically.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexstore.errors import IndexCorruptError, IndexFormatError
from indexstore.model import ArticleRecord, LegacyDecision

FORMAT_VERSION = 4
# Opened for writing, migrated to FORMAT_VERSION; read-only, its records read as they are.
LEGACY_FORMAT_VERSION = 3
MAX_SKETCH_BYTES = 2**16 - 1
NO_SEQ = 2**64 - 1
NO_WATERMARK = -(2**63)

META_KEY = b"meta"
STATE_KEY = b"state"
POSITION_PREFIX = b"pos:"
BLOB_PREFIX = b"b"
ROW_PREFIX = b"r"

GROUP_CF_PREFIX = "group."
ARTICLES_CF_PREFIX = "articles."

_STATE = struct.Struct(">qQQ")
_U64 = struct.Struct(">Q")
_SEGMENT_BIAS = 2**63
_ROW_KEY = np.dtype([("prefix", "S1"), ("segment", ">u8"), ("seq", ">u8")])
_RECORD_HEAD = struct.Struct(">BQ16sqQH")
# The part of the head every record version shares: up to and with the seq.
_COMMON_HEAD = struct.Struct(">BQ16sqQ")
# Where a record's seq lies: records equal but for their row are equal as articles.
_SEQ_AT = struct.calcsize(">BQ16sq")
# _RECORD_HEAD as one numpy record, for encoding many records at once.
_HEADS = np.dtype(
    [
        ("version", "u1"),
        ("simhash", ">u8"),
        ("content_hash", "V16"),
        ("event_time", ">i8"),
        ("seq", ">u8"),
        ("sketch_len", ">u2"),
    ]
)
RECORD_VERSION = 3
# Record version 2, of index format 3: the head, then the decision's fields.
_LEGACY_RECORD_VERSION = 2
_LEGACY_HEAD = struct.Struct(">BQ16sqQbB")
_LEGACY_LENGTHS = struct.Struct(">HHHH")
_LEGACY_LATE = 1
_LEGACY_MATCHED = 2


@dataclass(frozen=True, slots=True)
class Meta:
    max_distance: int
    segment_ms: int
    group_ms: int
    generation_ms: int
    format: int = FORMAT_VERSION


def encode_meta(meta: Meta) -> bytes:
    return json.dumps(
        {
            "format": meta.format,
            "max_distance": meta.max_distance,
            "segment_ms": meta.segment_ms,
            "group_ms": meta.group_ms,
            "generation_ms": meta.generation_ms,
        },
        sort_keys=True,
    ).encode()


def decode_meta(raw: bytes) -> Meta:
    try:
        doc = json.loads(raw)
        fmt = doc["format"]
    except (ValueError, KeyError, TypeError) as e:
        raise IndexCorruptError(f"unreadable index metadata: {e}") from e
    if fmt not in (FORMAT_VERSION, LEGACY_FORMAT_VERSION):
        raise IndexFormatError(
            f"index format {fmt} is not supported by this version (expects {FORMAT_VERSION}, "
            f"or {LEGACY_FORMAT_VERSION}, which it migrates); "
            "rebuild the index in a new directory by replaying the feed, or use the matching "
            "newsdedup version"
        )
    try:
        return Meta(
            int(doc["max_distance"]),
            int(doc["segment_ms"]),
            int(doc["group_ms"]),
            int(doc["generation_ms"]),
            fmt,
        )
    except (ValueError, KeyError, TypeError) as e:
        raise IndexCorruptError(f"unreadable index metadata: {e}") from e


def encode_state(watermark_ms: int | None, next_seq: int, commits: int) -> bytes:
    wm = NO_WATERMARK if watermark_ms is None else watermark_ms
    return _STATE.pack(wm, next_seq, commits)


def decode_state(raw: bytes | None) -> tuple[int | None, int, int]:
    if raw is None:
        return None, 0, 0
    wm, next_seq, commits = _STATE.unpack(raw)
    return (None if wm == NO_WATERMARK else wm), next_seq, commits


def position_key(key: str) -> bytes:
    return POSITION_PREFIX + key.encode()


def position_name(raw_key: bytes) -> str:
    return raw_key[len(POSITION_PREFIX) :].decode()


def encode_u64(value: int) -> bytes:
    return _U64.pack(value)


def decode_u64(raw: bytes) -> int:
    value: int = _U64.unpack(raw)[0]
    return value


def group_cf(group_id: int) -> str:
    return f"{GROUP_CF_PREFIX}{group_id}"


def articles_cf(generation: int) -> str:
    return f"{ARTICLES_CF_PREFIX}{generation}"


def parse_cf(name: str) -> tuple[str, int] | None:
    """("group", id) or ("articles", gen) for our column families, None for others."""
    for prefix, kind in ((GROUP_CF_PREFIX, "group"), (ARTICLES_CF_PREFIX, "articles")):
        if name.startswith(prefix):
            try:
                return kind, int(name[len(prefix) :])
            except ValueError:
                return None
    return None


def _segment_bytes(segment_id: int) -> bytes:
    return _U64.pack(segment_id + _SEGMENT_BIAS)


def blob_key(segment_id: int, commit: int) -> bytes:
    return BLOB_PREFIX + _segment_bytes(segment_id) + _U64.pack(commit)


def replaced_key(segment_id: int) -> bytes:
    """Where a segment keeps how many rows of its blobs were replaced since (their row keys
    deleted): commit numbers start at 1, so this key sorts first among its blobs and goes
    with the segment's range deletion."""
    return blob_key(segment_id, 0)


def blob_segment(key: bytes) -> int:
    biased: int = _U64.unpack_from(key, len(BLOB_PREFIX))[0]
    return biased - _SEGMENT_BIAS


def row_key(segment_id: int, seq: int) -> bytes:
    return ROW_PREFIX + _segment_bytes(segment_id) + _U64.pack(seq)


def row_keys(segment_id: int, seqs: np.ndarray) -> list[bytes]:
    """`row_key` of many rows of one segment, built in one numpy pass."""
    keys = np.empty(len(seqs), dtype=_ROW_KEY)
    keys["prefix"] = ROW_PREFIX
    keys["segment"] = segment_id + _SEGMENT_BIAS
    keys["seq"] = seqs
    raw = keys.tobytes()
    size = _ROW_KEY.itemsize
    return [raw[i : i + size] for i in range(0, len(raw), size)]


def segment_ranges(segment_id: int) -> tuple[tuple[bytes, bytes], ...]:
    """The [begin, end) key ranges holding everything of one segment in its group."""
    this, after = _segment_bytes(segment_id), _segment_bytes(segment_id + 1)
    return tuple((prefix + this, prefix + after) for prefix in (BLOB_PREFIX, ROW_PREFIX))


def encode_blob(simhashes: np.ndarray, seqs: np.ndarray) -> bytes:
    n = len(simhashes)
    return b"".join(
        (
            struct.pack("<I", n),
            simhashes.astype("<u8", copy=False).tobytes(),
            seqs.astype("<u8", copy=False).tobytes(),
        )
    )


def decode_blob(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    (n,) = struct.unpack_from("<I", raw)
    if len(raw) != 4 + 16 * n:
        raise IndexCorruptError("a fingerprint blob has the wrong length")
    simhashes = np.frombuffer(raw, dtype="<u8", count=n, offset=4)
    seqs = np.frombuffer(raw, dtype="<u8", count=n, offset=4 + 8 * n)
    return simhashes, seqs


def encode_record(record: ArticleRecord, seq: int | None) -> bytes:
    head = _RECORD_HEAD.pack(
        RECORD_VERSION,
        record.simhash,
        record.content_hash,
        record.event_time_ms,
        NO_SEQ if seq is None else seq,
        len(record.sketch),
    )
    return b"".join((head, record.sketch, record.payload))


def encode_records(
    columns: tuple[Sequence[Any], ...], event_times: Sequence[int], seqs: Sequence[int | None]
) -> list[bytes]:
    """`encode_record` of many records given as columns in `ArticleRecord` field order,
    with their (clamped) event times and seqs in place of the columns' own times. The fixed
    heads are packed by numpy for all records at once; only the joins are per record."""
    # Columns beyond the sketch (bands, shingles) are not part of the record's bytes here.
    _, simhash, content_hash, _, payload, sketch, *_ = columns
    n = len(simhash)
    heads = np.zeros(n, dtype=_HEADS)
    heads["version"] = RECORD_VERSION
    heads["simhash"] = np.array(simhash, dtype=np.uint64)
    heads["content_hash"] = np.frombuffer(b"".join(content_hash), dtype="V16")
    heads["event_time"] = event_times
    heads["seq"] = [NO_SEQ if seq is None else seq for seq in seqs]
    heads["sketch_len"] = np.fromiter(map(len, sketch), dtype=np.int64, count=n)
    raw = heads.tobytes()
    size = _HEADS.itemsize
    return [
        b"".join((raw[at : at + size], s, p))
        for at, s, p in zip(range(0, n * size, size), sketch, payload, strict=True)
    ]


def record_row(raw: bytes) -> tuple[int, int | None]:
    """(event time, row seq or None) of an encoded record, without decoding the rest. The
    same bytes in both record versions."""
    _, _, _, event_time, seq = _COMMON_HEAD.unpack_from(raw)
    return event_time, (None if seq == NO_SEQ else seq)


def record_identity(raw: bytes) -> bytes:
    """An encoded record without its seq: two records of one id are equal exactly when
    these are (the id is the key, not part of the value)."""
    return raw[:_SEQ_AT] + raw[_SEQ_AT + 8 :]


def record_version(raw: bytes) -> int:
    return raw[0]


def decode_record(article_id: str, raw: bytes) -> tuple[ArticleRecord, int | None]:
    """The record and its row seq (None when it is not in the search tables)."""
    version, simhash, content_hash, event_time, seq, sketch_len = _RECORD_HEAD.unpack_from(raw)
    if version != RECORD_VERSION:
        raise IndexFormatError(f"article record version {version} is not supported")
    end = _RECORD_HEAD.size + sketch_len
    record = ArticleRecord(
        article_id=article_id,
        simhash=simhash,
        content_hash=content_hash,
        event_time_ms=event_time,
        payload=raw[end:],
        sketch=raw[_RECORD_HEAD.size : end],
    )
    return record, (None if seq == NO_SEQ else seq)


def decode_legacy_record(
    article_id: str, raw: bytes
) -> tuple[ArticleRecord, LegacyDecision, int | None]:
    """A record of version 2 (index format 3): the record without a payload, the decision
    and payload it held, and its row seq."""
    version, simhash, content_hash, event_time, seq, distance, flags = _LEGACY_HEAD.unpack_from(raw)
    if version != _LEGACY_RECORD_VERSION:
        raise IndexFormatError(f"article record version {version} is not a legacy record")
    a, b, c, s = _LEGACY_LENGTHS.unpack_from(raw, _LEGACY_HEAD.size)
    pos = _LEGACY_HEAD.size + _LEGACY_LENGTHS.size
    decision = raw[pos : pos + a].decode()
    cluster_id = raw[pos + a : pos + a + b].decode()
    matched_id = raw[pos + a + b : pos + a + b + c].decode()
    pos += a + b + c
    sketch = raw[pos : pos + s]
    legacy = LegacyDecision(
        article_id=article_id,
        cluster_id=cluster_id,
        decision=decision,
        matched_id=matched_id if flags & _LEGACY_MATCHED else None,
        distance=None if distance < 0 else distance,
        late=bool(flags & _LEGACY_LATE),
        payload=raw[pos + s :],
    )
    record = ArticleRecord(article_id, simhash, content_hash, event_time, b"", sketch)
    return record, legacy, (None if seq == NO_SEQ else seq)
