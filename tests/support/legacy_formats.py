"""An index as an earlier format left it on disk, so tests can check that this version
refuses it: format 4, whose article records (version 3) had no bands and which kept no
shingles.

The layout is history and never changes, so this module does not rot; it is written from
the layout's documentation, independently of indexstore.encoding.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import rocksdict

_RECORD_HEAD_V3 = struct.Struct(">BQ16sqQH")
_RECORD_HEAD_V4 = struct.Struct(">BQ16sqQHH")
_SHINGLES_PREFIX = b"s"


def downgrade_to_format_4(path: Path) -> int:
    """Turn a closed index written by this version (format 5) into the one format 4 held
    with the same contents: records without bands, no shingles. Returns the records
    rewritten."""
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
                head = _RECORD_HEAD_V3.pack(3, simhash, chash, event_time, seq, n_sketch)
                wb.put(key, head + sketch + payload, handle)
                rewritten += 1
            db.write(wb)
            del cf, handle
        meta = json.loads(db[b"meta"])
        assert meta["format"] == 5, meta
        meta["format"] = 4
        db[b"meta"] = json.dumps(meta, sort_keys=True).encode()
    finally:
        db.close()
    return rewritten
