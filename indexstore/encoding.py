"""Every byte layout of the index on disk: column family names, keys and values.

Nobody else builds or slices these bytes. The RocksDB database (raw mode) holds:

column family ``default`` (small, fixed keys)
    b"meta"          -> UTF-8 JSON {"format": 5, "max_distance": k, "segment_ms": ...,
                        "group_ms": ..., "generation_ms": ...}; checked at open
    b"state"         -> >q watermark_ms (INT64_MIN = none) | >Q next_seq | >Q commits
    b"pos:" + KEY    -> >Q next offset to read (KEY: UTF-8, e.g. "news.raw/3")

column family ``group.<gid>`` (the segments of one group; gid = segment id // segments per
group, signed). SEG below is the segment id as >Q of (id + 2**63), so keys sort numerically
and a segment's keys are one contiguous range, dropped with one range deletion.
    b"b" + SEG + >Q commit -> fingerprint blob written by that commit (or merged blobs):
                              <I n | n x <Q simhash | n x <Q seq
    b"r" + SEG + >Q seq    -> article id (UTF-8) of row `seq`
    b"s" + SEG + >Q seq    -> the shingles of row `seq`'s record (`ArticleRecord.shingles`,
                              opaque; written only when not empty): kept apart from the record,
                              read only on request, and gone with the row (replaced, expired)

column family ``articles.<gen>`` (article table; gen = storage_time // generation_ms)
    article id (UTF-8) -> record:
        >B version(4) | >Q simhash | 16s content_hash | >q event_time_ms | >Q seq
        (2**64-1: not in the search tables) | >H sketch length | >H bands length | sketch |
        bands (little-endian u32 band keys) | payload (the rest, opaque: the caller's, e.g.
        the service's decision in consumer/deciding/stored.py)

Only this format is read: a directory of any other is refused (`IndexVersionError`) and the
index rebuilt by replaying the feed. No release wrote an earlier one, so nothing converts one.

A row is one article's entry in the search tables; `seq` numbers rows in insertion order,
never reused. Blobs are little-endian so numpy reads them without copying; keys are
big-endian so they sort numerically.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from indexstore.errors import IndexCorruptError, IndexFormatError, IndexStoreError
from indexstore.model import ArticleRecord

FORMAT_VERSION = 5
MAX_SKETCH_BYTES = 2**16 - 1
# The band tables keep a key's band in 4 bits of each entry (indexstore/bands.py).
MAX_BANDS = 16
BAND_KEY_BYTES = 4
NO_SEQ = 2**64 - 1
NO_WATERMARK = -(2**63)

META_KEY = b"meta"
STATE_KEY = b"state"
POSITION_PREFIX = b"pos:"
BLOB_PREFIX = b"b"
ROW_PREFIX = b"r"
SHINGLES_PREFIX = b"s"

GROUP_CF_PREFIX = "group."
ARTICLES_CF_PREFIX = "articles."

_STATE = struct.Struct(">qQQ")
_U64 = struct.Struct(">Q")
_SEGMENT_BIAS = 2**63
_ROW_KEY = np.dtype([("prefix", "S1"), ("segment", ">u8"), ("seq", ">u8")])
_RECORD_HEAD = struct.Struct(">BQ16sqQHH")
# The head up to and with the seq: what `record_row` reads.
_ROW_HEAD = struct.Struct(">BQ16sqQ")
# Where a record's seq lies: records equal but for their row are equal as articles.
_SEQ_AT = struct.calcsize(">BQ16sq")
# The lengths after the seq in a current record: sketch, bands.
_BAND_LENGTHS = struct.Struct(">HH")
# _RECORD_HEAD as one numpy record, for encoding many records at once.
_HEADS = np.dtype(
    [
        ("version", "u1"),
        ("simhash", ">u8"),
        ("content_hash", "V16"),
        ("event_time", ">i8"),
        ("seq", ">u8"),
        ("sketch_len", ">u2"),
        ("bands_len", ">u2"),
    ]
)
RECORD_VERSION = 4


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


def meta_format(raw: bytes) -> int:
    """The format the metadata says the index has; read before the rest, whose fields may
    differ in another format."""
    format_version: int = _meta_document(raw)["format"]
    return format_version


def decode_meta(raw: bytes) -> Meta:
    doc = _meta_document(raw)
    try:
        return Meta(
            int(doc["max_distance"]),
            int(doc["segment_ms"]),
            int(doc["group_ms"]),
            int(doc["generation_ms"]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise IndexCorruptError(f"unreadable index metadata: {e}") from e


def _meta_document(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
        doc["format"]
    except (ValueError, KeyError, TypeError) as e:
        raise IndexCorruptError(f"unreadable index metadata: {e}") from e
    return cast("dict[str, Any]", doc)


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
    return tuple(
        (prefix + this, prefix + after) for prefix in (BLOB_PREFIX, ROW_PREFIX, SHINGLES_PREFIX)
    )


def shingles_key(segment_id: int, seq: int) -> bytes:
    return SHINGLES_PREFIX + _segment_bytes(segment_id) + _U64.pack(seq)


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


def check_bands(size: int) -> None:
    """Refuse band keys of `size` bytes that a record cannot hold."""
    if size % BAND_KEY_BYTES or size > MAX_BANDS * BAND_KEY_BYTES:
        raise IndexStoreError(
            f"bands must be at most {MAX_BANDS} keys of {BAND_KEY_BYTES} bytes, got {size} bytes"
        )


def encode_record(record: ArticleRecord, seq: int | None) -> bytes:
    head = _RECORD_HEAD.pack(
        RECORD_VERSION,
        record.simhash,
        record.content_hash,
        record.event_time_ms,
        NO_SEQ if seq is None else seq,
        len(record.sketch),
        len(record.bands),
    )
    return b"".join((head, record.sketch, record.bands, record.payload))


def encode_records(
    columns: tuple[Sequence[Any], ...], event_times: Sequence[int], seqs: Sequence[int | None]
) -> list[bytes]:
    """`encode_record` of many records given as columns in `ArticleRecord` field order,
    with their (clamped) event times and seqs in place of the columns' own times (the
    shingles column, not part of the record, is ignored). The fixed heads are packed by numpy
    for all records at once; only the joins are per record."""
    _, simhash, content_hash, _, payload, sketch, bands = columns[:7]
    n = len(simhash)
    heads = np.zeros(n, dtype=_HEADS)
    heads["version"] = RECORD_VERSION
    heads["simhash"] = np.array(simhash, dtype=np.uint64)
    heads["content_hash"] = np.frombuffer(b"".join(content_hash), dtype="V16")
    heads["event_time"] = event_times
    heads["seq"] = [NO_SEQ if seq is None else seq for seq in seqs]
    heads["sketch_len"] = np.fromiter(map(len, sketch), dtype=np.int64, count=n)
    heads["bands_len"] = np.fromiter(map(len, bands), dtype=np.int64, count=n)
    raw = heads.tobytes()
    size = _HEADS.itemsize
    return [
        b"".join((raw[at : at + size], s, b, p))
        for at, s, b, p in zip(range(0, n * size, size), sketch, bands, payload, strict=True)
    ]


def record_row(raw: bytes) -> tuple[int, int | None]:
    """(event time, row seq or None) of an encoded record, without decoding the rest."""
    _, _, _, event_time, seq = _ROW_HEAD.unpack_from(raw)
    return event_time, (None if seq == NO_SEQ else seq)


def record_identity(raw: bytes) -> bytes:
    """An encoded record without its seq: two records of one id are equal exactly when
    these are (the id is the key, not part of the value)."""
    return raw[:_SEQ_AT] + raw[_SEQ_AT + 8 :]


def decode_record(article_id: str, raw: bytes) -> tuple[ArticleRecord, int | None]:
    """The record and its row seq (None when it is not in the search tables)."""
    version, simhash, content_hash, event_time, seq, sketch_len, bands_len = (
        _RECORD_HEAD.unpack_from(raw)
    )
    if version != RECORD_VERSION:
        raise IndexFormatError(f"article record version {version} is not supported")
    sketch_end = _RECORD_HEAD.size + sketch_len
    end = sketch_end + bands_len
    record = ArticleRecord(
        article_id=article_id,
        simhash=simhash,
        content_hash=content_hash,
        event_time_ms=event_time,
        payload=raw[end:],
        sketch=raw[_RECORD_HEAD.size : sketch_end],
        bands=raw[sketch_end:end],
    )
    return record, (None if seq == NO_SEQ else seq)


def record_bands(raw: bytes) -> bytes:
    """The band keys of an encoded record, nothing else decoded."""
    sketch_len, bands_len = _BAND_LENGTHS.unpack_from(raw, _SEQ_AT + 8)
    start = _RECORD_HEAD.size + sketch_len
    return raw[start : start + bands_len]
