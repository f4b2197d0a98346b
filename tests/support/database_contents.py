"""What an index directory holds, read with RocksDB itself rather than through the index, so
a test sees the bytes on disk whatever the index would make of them."""

from __future__ import annotations

from pathlib import Path

import rocksdict


def database_contents(path: Path) -> dict[str, dict[bytes, bytes]]:
    """Every key and value of every column family of the closed database in `path`."""
    names = rocksdict.Rdict.list_cf(str(path))
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(
        str(path),
        opts,
        column_families={n: opts for n in names if n != "default"},
        access_type=rocksdict.AccessType.read_only(),
    )
    try:
        found = {}
        for name in names:
            cf = db.get_column_family(name)
            found[name] = dict(cf.items())
            del cf
        return found
    finally:
        db.close()
