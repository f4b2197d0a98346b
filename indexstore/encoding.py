"""Every byte layout of the index on disk: column family names, keys and values.

Nobody else builds or slices these bytes. The RocksDB database (raw mode) holds:

column family ``default`` (small, fixed keys)
    b"meta"          -> UTF-8 JSON {"format": 3, "max_distance": k, "segment_ms": ...,
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
        >B version(2) | >Q simhash | 16s content_hash | >q event_time_ms | >Q seq
        (2**64-1: not in the search tables) | >b distance (-1: none) | >B flags
        (bit 0 late, bit 1 matched_id present) | >HHHH lengths of the UTF-8 strings
        decision, cluster_id, matched_id and of the sketch | the three strings | sketch |
        payload (the rest)

Formats 1 and 2 had a column family per segment; creating one costs ~80 ms, which dominated
replays of history. They are refused (the index is rebuilt by replaying the feed).

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
from indexstore.model import ArticleRecord

FORMAT_VERSION = 3
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
_RECORD_HEAD = struct.Struct(">BQ16sqQbB")
# Where a record's seq lies: records equal but for their row are equal as articles.
_SEQ_AT = struct.calcsize(">BQ16sq")
_LENGTHS = struct.Struct(">HHHH")
# _RECORD_HEAD and _LENGTHS as one numpy record, for encoding many records at once.
_HEADS = np.dtype(
    [
        ("version", "u1"),
        ("simhash", ">u8"),
        ("content_hash", "V16"),
        ("event_time", ">i8"),
        ("seq", ">u8"),
        ("distance", "i1"),
        ("flags", "u1"),
        ("decision_len", ">u2"),
        ("cluster_len", ">u2"),
        ("matched_len", ">u2"),
        ("sketch_len", ">u2"),
    ]
)
_RECORD_VERSION = 2
_FLAG_LATE = 1
_FLAG_MATCHED = 2


@dataclass(frozen=True, slots=True)
class Meta:
    max_distance: int
    segment_ms: int
    group_ms: int
    generation_ms: int


def encode_meta(meta: Meta) -> bytes:
    return json.dumps(
        {
            "format": FORMAT_VERSION,
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
    if fmt != FORMAT_VERSION:
        raise IndexFormatError(
            f"index format {fmt} is not supported by this version (expects {FORMAT_VERSION}); "
            "rebuild the index in a new directory by replaying the feed, or use the matching "
            "newsdedup version"
        )
    try:
        return Meta(
            int(doc["max_distance"]),
            int(doc["segment_ms"]),
            int(doc["group_ms"]),
            int(doc["generation_ms"]),
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
    flags = (_FLAG_LATE if record.late else 0) | (
        _FLAG_MATCHED if record.matched_id is not None else 0
    )
    decision = record.decision.encode()
    cluster = record.cluster_id.encode()
    matched = record.matched_id.encode() if record.matched_id is not None else b""
    return b"".join(
        (
            _RECORD_HEAD.pack(
                _RECORD_VERSION,
                record.simhash,
                record.content_hash,
                record.event_time_ms,
                NO_SEQ if seq is None else seq,
                -1 if record.distance is None else record.distance,
                flags,
            ),
            _LENGTHS.pack(len(decision), len(cluster), len(matched), len(record.sketch)),
            decision,
            cluster,
            matched,
            record.sketch,
            record.payload,
        )
    )


def encode_records(
    columns: tuple[Sequence[Any], ...], event_times: Sequence[int], seqs: Sequence[int | None]
) -> list[bytes]:
    """`encode_record` of many records given as columns in `ArticleRecord` field order,
    with their (clamped) event times and seqs in place of the columns' own times. The fixed
    heads are packed by numpy for all records at once; only the joins are per record."""
    (
        _,
        simhash,
        content_hash,
        _,
        cluster_id,
        decision,
        matched_id,
        distance,
        late,
        payload,
        sketch,
    ) = columns
    n = len(simhash)
    decisions = list(map(str.encode, decision))
    clusters = list(map(str.encode, cluster_id))
    matched = [b"" if m is None else m.encode() for m in matched_id]
    heads = np.zeros(n, dtype=_HEADS)
    heads["version"] = _RECORD_VERSION
    heads["simhash"] = np.array(simhash, dtype=np.uint64)
    heads["content_hash"] = np.frombuffer(b"".join(content_hash), dtype="V16")
    heads["event_time"] = event_times
    heads["seq"] = [NO_SEQ if seq is None else seq for seq in seqs]
    heads["distance"] = [-1 if d is None else d for d in distance]
    heads["flags"] = np.array(late, dtype=np.uint8) * _FLAG_LATE + _FLAG_MATCHED * np.fromiter(
        (m is not None for m in matched_id), dtype=np.uint8, count=n
    )
    for name, parts in (
        ("decision_len", decisions),
        ("cluster_len", clusters),
        ("matched_len", matched),
        ("sketch_len", sketch),
    ):
        heads[name] = np.fromiter(map(len, parts), dtype=np.int64, count=n)
    raw = heads.tobytes()
    size = _HEADS.itemsize
    return [
        b"".join((raw[at : at + size], d, c, m, s, p))
        for at, d, c, m, s, p in zip(
            range(0, n * size, size), decisions, clusters, matched, sketch, payload, strict=True
        )
    ]


def record_row(raw: bytes) -> tuple[int, int | None]:
    """(event time, row seq or None) of an encoded record, without decoding the rest."""
    _, _, _, event_time, seq, _, _ = _RECORD_HEAD.unpack_from(raw)
    return event_time, (None if seq == NO_SEQ else seq)


def record_identity(raw: bytes) -> bytes:
    """An encoded record without its seq: two records of one id are equal exactly when
    these are (the id is the key, not part of the value)."""
    return raw[:_SEQ_AT] + raw[_SEQ_AT + 8 :]


def decode_record(article_id: str, raw: bytes) -> tuple[ArticleRecord, int | None]:
    """The record and its row seq (None when it is not in the search tables)."""
    version, simhash, content_hash, event_time, seq, distance, flags = _RECORD_HEAD.unpack_from(raw)
    if version != _RECORD_VERSION:
        raise IndexFormatError(f"article record version {version} is not supported")
    a, b, c, s = _LENGTHS.unpack_from(raw, _RECORD_HEAD.size)
    pos = _RECORD_HEAD.size + _LENGTHS.size
    decision = raw[pos : pos + a].decode()
    cluster_id = raw[pos + a : pos + a + b].decode()
    matched_id = raw[pos + a + b : pos + a + b + c].decode()
    pos += a + b + c
    sketch = raw[pos : pos + s]
    pos += s
    record = ArticleRecord(
        article_id=article_id,
        simhash=simhash,
        content_hash=content_hash,
        event_time_ms=event_time,
        cluster_id=cluster_id,
        decision=decision,
        matched_id=matched_id if flags & _FLAG_MATCHED else None,
        distance=None if distance < 0 else distance,
        late=bool(flags & _FLAG_LATE),
        payload=raw[pos:],
        sketch=sketch,
    )
    return record, (None if seq == NO_SEQ else seq)
