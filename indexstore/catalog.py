"""The catalog of an open index: its column families, the segments in them, and reads by key.

Groups of segments and article generations are column families, created when a commit first
needs one and dropped by expiry; a segment is a key range in its group. The catalog holds
their handles and what is known of each segment without reading it, and reads article
records and row ids through them. It does not decide what to write or when to expire: the
store does. It may import rocksdict and indexstore.encoding, .commit and
.rocksdb_errors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple, cast

import rocksdict

from indexstore import encoding as enc
from indexstore.commit import Stored, StoredBytes
from indexstore.rocksdb_errors import RocksDBErrors


class Group:
    """The column family of a group of consecutive segments."""

    __slots__ = ("cf", "handle", "id")

    def __init__(self, group_id: int, cf: rocksdict.Rdict, handle: rocksdict.ColumnFamily) -> None:
        self.id = group_id
        self.cf = cf
        self.handle = handle


class Generation(NamedTuple):
    """The column family of an article generation."""

    id: int
    cf: rocksdict.Rdict
    handle: rocksdict.ColumnFamily


class Segment:
    """A segment's keys in its group and what we know of it without reading it."""

    __slots__ = ("blobs", "group", "id", "rows", "stored")

    def __init__(self, segment_id: int, group: Group) -> None:
        self.id = segment_id
        self.group = group
        self.blobs: list[bytes] = []  # blob keys, oldest first
        self.rows = 0  # live rows (replaced rows are subtracted)
        self.stored = 0  # rows in its blobs (replaced rows included), which the tables hold


def multi_get(cf: rocksdict.Rdict, keys: list[bytes]) -> list[bytes | None]:
    """The values of `keys` in `cf` (None: missing), in one multi-get. rocksdict's stub types
    the answer to a list of keys as one value, and the list as one of mixed key types."""
    return cast("list[bytes | None]", cf.get(cast("list[str | int | float | bytes | bool]", keys)))


class Catalog:
    """The groups, segments and generations of an open index. `segments` and `groups` may be
    read and a segment's counts updated by the store; families come and go only here."""

    __slots__ = (
        "_db",
        "_errors",
        "_meta",
        "_newest_first",
        "_opts",
        "generations",
        "groups",
        "segments",
    )

    def __init__(
        self,
        db: rocksdict.Rdict,
        opts: rocksdict.Options,
        errors: RocksDBErrors,
        meta: enc.Meta,
        groups: dict[int, Group],
        segments: dict[int, Segment],
        generations: dict[int, Generation],
    ) -> None:
        self._db = db
        self._opts = opts  # every column family is created with these: one memory budget
        self._errors = errors
        self._meta = meta
        self.groups = groups
        self.segments = segments
        self.generations = generations
        self._newest_first = self._generation_order()

    def column_families(self) -> list[rocksdict.Rdict]:
        return [g.cf for g in self.groups.values()] + [g.cf for g in self.generations.values()]

    # -- reads ----------------------------------------------------------------------------

    def read_record(self, article_id: str) -> Stored | None:
        """The current record of `article_id` in the committed article table."""
        key = article_id.encode()
        with self._errors:
            for generation in self._newest_first:
                raw = generation.cf.get(key)
                if raw is not None:
                    record, seq = enc.decode_record(article_id, raw)
                    return Stored(record, seq, generation.id)
        return None

    def read_records(self, article_ids: Sequence[str]) -> dict[str, Stored]:
        """Batched `read_record`: one multi-get per live generation."""
        found: dict[str, Stored] = {}
        raws = self.read_raw(article_ids)
        with self._errors:
            for article_id, stored in raws.items():
                record, seq = enc.decode_record(article_id, stored.value)
                found[article_id] = Stored(record, seq, stored.generation)
        return found

    def read_raw(self, article_ids: Sequence[str]) -> dict[str, StoredBytes]:
        """The encoded current records of these ids: one multi-get per live generation."""
        found: dict[str, StoredBytes] = {}
        pending = list(dict.fromkeys(article_ids))
        with self._errors:
            for generation in self._newest_first:
                if not pending:
                    break
                raws = multi_get(generation.cf, [a.encode() for a in pending])
                missing = []
                for article_id, raw in zip(pending, raws, strict=True):
                    if raw is None:
                        missing.append(article_id)
                    else:
                        found[article_id] = StoredBytes(raw, generation.id)
                pending = missing
        return found

    def row_ids(self, segments: Sequence[int], seqs: Sequence[int]) -> list[str | None]:
        """Article ids of the rows (segment, seq), by batched gets of their row keys; None
        for a row that is no longer stored."""
        raws = self._read_rows(enc.row_key, segments, seqs)
        return [None if raw is None else raw.decode() for raw in raws]

    def read_shingles(self, segments: Sequence[int], seqs: Sequence[int]) -> list[bytes | None]:
        """The shingles of the rows (segment, seq); None for a row without any or no longer
        stored."""
        return self._read_rows(enc.shingles_key, segments, seqs)

    def _read_rows(
        self, key_of: Callable[[int, int], bytes], segments: Sequence[int], seqs: Sequence[int]
    ) -> list[bytes | None]:
        """The values under `key_of(segment, seq)` of these rows, by one multi-get per group."""
        found: list[bytes | None] = [None] * len(segments)
        by_group: dict[int, list[int]] = defaultdict(list)
        keys: list[bytes] = []
        for i, (sid, seq) in enumerate(zip(segments, seqs, strict=True)):
            seg = self.segments.get(sid)
            keys.append(key_of(sid, seq))
            if seg is not None:
                by_group[seg.group.id].append(i)
        with self._errors:
            for gid, positions in by_group.items():
                raws = multi_get(self.groups[gid].cf, [keys[i] for i in positions])
                for i, raw in zip(positions, raws, strict=True):
                    found[i] = raw
        return found

    # -- writes ---------------------------------------------------------------------------

    def segment_for_write(self, sid: int) -> Segment:
        seg = self.segments.get(sid)
        if seg is None:
            gid = sid * self._meta.segment_ms // self._meta.group_ms
            group = self.groups.get(gid)
            if group is None:
                # Creating a column family is durable on its own; after a crash an empty
                # group may remain, which holds nothing and is expired like any other.
                cf, handle = self._create(enc.group_cf(gid))
                group = self.groups[gid] = Group(gid, cf, handle)
            seg = self.segments[sid] = Segment(sid, group)
        return seg

    def generation_for_write(self, gen: int) -> Generation:
        generation = self.generations.get(gen)
        if generation is None:
            cf, handle = self._create(enc.articles_cf(gen))
            generation = self.generations[gen] = Generation(gen, cf, handle)
            self._newest_first = self._generation_order()
        return generation

    # -- expiry ---------------------------------------------------------------------------

    def drop_group(self, gid: int) -> None:
        group = self.groups.pop(gid)
        # Our references keep the column family alive; release them before dropping.
        del group.cf, group.handle
        with self._errors:
            self._db.drop_column_family(enc.group_cf(gid))

    def drop_generation(self, gen: int) -> None:
        del self.generations[gen]
        self._newest_first = self._generation_order()
        with self._errors:
            self._db.drop_column_family(enc.articles_cf(gen))

    def clear(self) -> None:
        """Release every handle (before the database is closed)."""
        self.segments.clear()
        self.groups.clear()
        self.generations.clear()
        self._newest_first = []

    def _generation_order(self) -> list[Generation]:
        """Live generations, newest first (an article's latest record is usually there)."""
        return [self.generations[g] for g in sorted(self.generations, reverse=True)]

    def _create(self, name: str) -> tuple[rocksdict.Rdict, rocksdict.ColumnFamily]:
        with self._errors:
            cf = self._db.create_column_family(name, self._opts)
            handle = self._db.get_column_family_handle(name)
        return cf, handle
