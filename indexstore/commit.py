"""What the store and its two writers (`Batch`, the bulk load) hand each other.

`Stored` is an article's committed record as the store reads it; `Commit` is everything one
commit writes, built by a writer and written by `IndexStore` in one WriteBatch. Plain records
without behaviour; imports only numpy and indexstore.model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from indexstore.model import ArticleRecord


class Stored(NamedTuple):
    """An article's current record, the seq of its row in the search tables (None: the record
    is not searchable, it came late) and the generation (article column family) it is in."""

    record: ArticleRecord
    seq: int | None
    generation: int


class StoredBytes(NamedTuple):
    """An article's current record still encoded, and its generation."""

    value: bytes
    generation: int


class Candidate(NamedTuple):
    """A row within k of a query: its seq, its article and its distance to the query."""

    seq: int
    article_id: str
    distance: int


class BandCandidate(NamedTuple):
    """A row sharing band keys with a query: its seq, its article and how many it shares
    (an upper bound: the band tables keep part of each key)."""

    seq: int
    article_id: str
    shared: int


class SegmentRows(NamedTuple):
    """The new rows of one segment: fingerprints and seqs (uint64), article ids (UTF-8) and
    their records' shingles (b"": none)."""

    fingerprints: np.ndarray
    seqs: np.ndarray
    article_ids: list[bytes]
    shingles: Sequence[bytes]


class TableRows(NamedTuple):
    """All new rows of a commit in seq order, as the search tables take them."""

    fingerprints: np.ndarray  # uint64
    segments: np.ndarray  # int64
    seqs: np.ndarray  # uint64
    bands: Sequence[bytes] | None  # their records' band keys (b"": none; None: not given)
    shingles: Sequence[bytes] | None = None  # their records' shingles (b"": none; None: not given)
    posted: Sequence[bytes] | None = None  # their posted keys, if taken already (None: not)


class DeadRow(NamedTuple):
    """A committed row replaced by a newer record of its article."""

    segment: int
    seq: int


class DeadRecord(NamedTuple):
    """A committed article record replaced by a newer one in another or the same generation."""

    generation: int
    key: bytes  # the article id, UTF-8


class RecordWrites(NamedTuple):
    """Article records to write, as columns (record i is keys[i], values[i], generations[i]):
    the id (UTF-8), the encoded record and its generation. Columns, not one object per
    record: a commit writes thousands."""

    keys: list[bytes]
    values: list[bytes]
    generations: list[int]


@dataclass(frozen=True, slots=True)
class Commit:
    """Everything one commit writes, in ONE WriteBatch (`IndexStore` says in what order).

    `rows`: segment -> its new rows; `added`: the same rows for the search tables (None: no
    rows); `dead_rows` and `dead_records`: replaced entries, deleted; `records`: article
    records to write; `positions`, `watermark` and `next_seq`: the state after the commit;
    `frequency_changes`: the key counts it changes.
    """

    rows: Mapping[int, SegmentRows]
    added: TableRows | None
    dead_rows: Sequence[DeadRow]
    dead_records: Sequence[DeadRecord]
    records: RecordWrites
    positions: Mapping[str, int]
    watermark: int | None
    next_seq: int
    # (segment, keys, +1 or -1): rows whose keys start or stop counting (indexstore/frequencies.py).
    frequency_changes: Sequence[tuple[int, np.ndarray, int]] = ()
