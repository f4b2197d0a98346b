"""The search tables saved at a clean close, so that reopening loads them instead of sorting.

A snapshot is valid only for the committed state it was saved with: its tag names the commit
count, the layout and every segment's stored rows, and is compared with what RocksDB holds at
open. After a crash, an expiry or a change of layout the tags differ and the tables are
rebuilt from the fingerprint blobs, as without a snapshot.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from indexstore.layout import Layout
from indexstore.tables import SearchTables

FILE_NAME = "search-tables.npz"
# Part of every tag: a snapshot of an earlier arrangement of the tables' arrays is stale.
# 2: runs hold each distinct fingerprint once, table 0's entries pointing at their rows
# (row starts saved only for a run in which some fingerprint has several rows).
# 3: the band tables' runs too.
# 4: the posted keys' runs too.
FORMAT = 4


def save(tables: SearchTables, directory: Path, tag: str) -> None:
    """Write atomically: a crash leaves the previous snapshot or none, never half of one."""
    final = directory / FILE_NAME
    partial = directory / (FILE_NAME + ".partial")
    with open(partial, "wb") as f:
        # numpy's stub cannot tell that no array is named like savez's `allow_pickle`.
        np.savez(f, tag=np.array(f"{FORMAT}|{tag}"), **tables.export())  # type: ignore[arg-type]
    os.replace(partial, final)


def load(
    directory: Path, layout: Layout, tag: str, expected_rows: int = 1024
) -> SearchTables | None:
    """The saved tables if their tag is `tag`, else None (missing, stale or unreadable); they
    grow towards `expected_rows` (`SearchTables`)."""
    path = directory / FILE_NAME
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as saved:
            if str(saved["tag"]) != f"{FORMAT}|{tag}":
                return None
            arrays = {name: saved[name] for name in saved.files if name != "tag"}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None
    return SearchTables.restore(layout, arrays, expected_rows)


def discard(directory: Path) -> None:
    (directory / FILE_NAME).unlink(missing_ok=True)
