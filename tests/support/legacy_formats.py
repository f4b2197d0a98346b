"""The byte layouts of earlier releases, written from their documentation, so tests can put
on disk what those releases left there: an index of format 4 (article records of version 3,
without bands; no shingles) or one of format 3 (article records of version 2, the decision in
fixed fields).

These layouts are history and never change, so this module does not rot; it is
deliberately independent of the project's own reader of them (indexstore.encoding), which
the tests check against it.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import rocksdict

from consumer.deciding import stored

_RECORD_HEAD = struct.Struct(">BQ16sqQbB")
_RECORD_LENGTHS = struct.Struct(">HHHH")
_RECORD_HEAD_V3 = struct.Struct(">BQ16sqQH")
_RECORD_HEAD_V4 = struct.Struct(">BQ16sqQHH")
_SHINGLES_PREFIX = b"s"
_TIME = struct.Struct(">q")
_ID_LENGTH = struct.Struct(">H")


def legacy_payload(decision: stored.StoredDecision) -> bytes:
    """What the service kept in the payload then: processed_at, then the corrected ids."""
    if decision.processed_at_ms is None:
        return b""
    parts = [_TIME.pack(decision.processed_at_ms)]
    for article_id in decision.corrected:
        raw = article_id.encode()
        parts += [_ID_LENGTH.pack(len(raw)), raw]
    return b"".join(parts)


def encode_record_v2(
    simhash: int,
    content_hash: bytes,
    event_time_ms: int,
    seq: int,
    decision: stored.StoredDecision,
    sketch: bytes,
) -> bytes:
    matched = decision.matched_id
    flags = (1 if decision.late else 0) | (2 if matched is not None else 0)
    strings = [decision.kind.value.encode(), decision.cluster_id.encode(), (matched or "").encode()]
    return b"".join(
        (
            _RECORD_HEAD.pack(
                2,
                simhash,
                content_hash,
                event_time_ms,
                seq,
                -1 if decision.distance is None else decision.distance,
                flags,
            ),
            _RECORD_LENGTHS.pack(*map(len, strings), len(sketch)),
            *strings,
            sketch,
            legacy_payload(decision),
        )
    )


def _downgrade(path: Path, to_format: int) -> int:
    """Rewrite the article records of a closed index of format 5 as `to_format`'s, drop its
    shingles (neither earlier format has any) and set its format; the records rewritten."""
    names = rocksdict.Rdict.list_cf(str(path))
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(
        str(path), opts, column_families={n: opts for n in names if n != "default"}
    )
    rewritten = 0
    try:
        for name in names:
            if name == "default":
                continue
            cf = db.get_column_family(name)
            handle = db.get_column_family_handle(name)
            wb = rocksdict.WriteBatch(raw_mode=True)
            for key, value in cf.items():
                if name.startswith("group."):
                    if key.startswith(_SHINGLES_PREFIX):
                        wb.delete(key, handle)
                    continue
                version, simhash, chash, event_time, seq, n_sketch, n_bands = (
                    _RECORD_HEAD_V4.unpack_from(value)
                )
                assert version == 4, version
                sketch_end = _RECORD_HEAD_V4.size + n_sketch
                sketch = value[_RECORD_HEAD_V4.size : sketch_end]
                payload = value[sketch_end + n_bands :]
                if to_format == 4:
                    head = _RECORD_HEAD_V3.pack(3, simhash, chash, event_time, seq, n_sketch)
                    old = head + sketch + payload
                else:
                    decision = stored.decode(key.decode(), payload)
                    old = encode_record_v2(simhash, chash, event_time, seq, decision, sketch)
                wb.put(key, old, handle)
                rewritten += 1
            db.write(wb)
            del cf, handle
        meta = json.loads(db[b"meta"])
        assert meta["format"] == 5, meta
        meta["format"] = to_format
        db[b"meta"] = json.dumps(meta, sort_keys=True).encode()
    finally:
        db.close()
    return rewritten


def downgrade_index(path: Path) -> int:
    """Turn a closed index written by this version (format 5) into the one the release before
    the previous would have written with the same contents (format 3), bands and shingles
    left out. Returns the records rewritten."""
    return _downgrade(path, 3)


def downgrade_index_to_format_4(path: Path) -> int:
    """Turn a closed index written by this version (format 5) into the one the previous
    release would have written with the same contents (format 4): records without bands,
    no shingles. Returns the records rewritten."""
    return _downgrade(path, 4)
