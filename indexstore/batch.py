"""The in-batch overlay: a batch's puts are searchable by its own later searches at once.

`Batch` holds one processed batch's changes in memory over the committed index and hands
them to the store as one `Commit`. It sees the committed index only through `CommittedIndex`,
the narrow interface the store gives it. Its own rows, and how its searches find them fast,
are indexstore.pending_rows; what its puts change of the key frequencies,
indexstore.pending_frequencies; the order of its answers, indexstore.ranking. It may import
indexstore.encoding, .commit, .errors, .frequencies, .layout, .model, .pending_rows,
.pending_frequencies, .ranking and .window, never indexstore.store.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

import numpy as np

from indexstore import encoding as enc
from indexstore.commit import (
    BandCandidate,
    Candidate,
    Commit,
    DeadRecord,
    DeadRow,
    RecordWrites,
    Stored,
)
from indexstore.errors import IndexStateError, IndexStoreError
from indexstore.frequencies import FrequencyPolicy, first_segment
from indexstore.layout import Layout
from indexstore.model import ArticleRecord, Match, SearchResult
from indexstore.pending_frequencies import PendingFrequencies
from indexstore.pending_rows import PendingRows
from indexstore.ranking import LiveRecord, rank_near, rank_shared, rank_sharing
from indexstore.window import is_late, window_start

# What a prefetched query learned (`Batch.prefetch_posted`): the counts' epoch then, whether
# a committed row shares enough of its rare keys, and the other queries that do.
_Probe = tuple[tuple[int | None, int], bool, list[bytes]]
_SEQ = (1 << 64) - 1


class CommittedIndex(Protocol):
    """What a batch is given of the committed index, and all it may do with it."""

    def read(self, article_id: str) -> Stored | None:
        """The committed current record of `article_id`."""

    def read_many(self, article_ids: Sequence[str]) -> dict[str, Stored]:
        """The committed current records of those ids that have one."""

    def nearest(self, simhashes: Sequence[int]) -> list[list[Candidate]]:
        """For each simhash, its closest committed rows within k, a bounded number of them."""

    def band_nearest(self, queries: Sequence[bytes], min_shared: int) -> list[list[BandCandidate]]:
        """For each query's band keys, the committed rows sharing about `min_shared` or more
        of them, those sharing most first, a bounded number of them."""

    def posted_rows(self, keys: Sequence[int]) -> dict[int, tuple[list[int], list[int]]]:
        """For each of these keys, the (segments, seqs) of the committed rows posted under
        it, a bounded number of them; keys no row has are left out."""

    def row_ids(self, segments: Sequence[int], seqs: Sequence[int]) -> list[str | None]:
        """The article ids of the committed rows (segment, seq), None where no longer stored."""

    def read_shingles(self, segments: Sequence[int], seqs: Sequence[int]) -> list[bytes | None]:
        """The stored shingles of the committed rows (segment, seq), None where none."""

    def frequency_policy(self) -> FrequencyPolicy | None:
        """Which keys of which records count (None: key frequencies are not kept)."""

    def frequencies(self, keys: np.ndarray, first: int | None) -> np.ndarray:
        """How many committed rows of segments from `first` on (None: all) carry each key."""

    def counted_between(self, low: int | None, high: int) -> bool:
        """Whether a committed row of a segment from `low` (None: any) up to `high` counts
        its keys."""

    def write(self, commit: Commit) -> None:
        """Write the batch's changes in one WriteBatch."""

    def expire(self) -> list[int]:
        """Drop the segments that have left the window."""

    def finished(self, batch: Batch) -> None:
        """`batch` is committed or aborted: the store may open another."""


@dataclass(frozen=True, slots=True)
class BatchStart:
    """The committed index's geometry and state when a batch begins."""

    layout: Layout
    max_distance: int
    segment_ms: int
    generation_ms: int
    retention_ms: int
    watermark: int | None
    next_seq: int
    # Clamping uses one "now" per batch, so a batch's answers do not drift with its length.
    time_limit: int


class Batch:
    """The changes of one processed batch, visible to its own later searches at once.

    Nothing reaches RocksDB before `commit`, which writes them all in one WriteBatch.
    """

    def __init__(
        self, index: CommittedIndex, start: BatchStart, watermark_follows_puts: bool = True
    ) -> None:
        self._index = index
        self._watermark_follows_puts = watermark_follows_puts
        self._segment_ms = start.segment_ms
        self._generation_ms = start.generation_ms
        self._retention_ms = start.retention_ms
        self._open = True
        self._watermark = start.watermark
        self._next_seq = start.next_seq
        # Current records of ids touched (pending) or read (committed) in this batch.
        self._pending: dict[str, Stored] = {}
        self._committed: dict[str, Stored | None] = {}
        # The committed rows' shingles read so far, by (segment, seq): a row does not change
        # while the batch is open, and one article is verified against many (an original
        # against its copies), its match's shingles read again to weigh the copy's story.
        self._shingles_read: dict[tuple[int, int], bytes | None] = {}
        # Old entries replaced in this batch, deleted at commit.
        self._dead_rows: list[DeadRow] = []
        self._dead_records: list[DeadRecord] = []
        self._time_limit = start.time_limit
        # This batch's rows, which its own searches find beside the committed ones.
        policy = index.frequency_policy()
        self._rows = PendingRows(
            start.layout,
            start.max_distance,
            start.segment_ms,
            None if policy is None else policy.posted,
        )
        self._positions: dict[str, int] = {}
        # Prefetched committed neighbours of each probe, and committed rows sharing band keys
        # with each probe's (by band keys and the least number shared).
        self._hits: dict[int, list[Candidate]] = {}
        self._band_hits: dict[tuple[bytes, int], list[BandCandidate]] = {}
        # Committed rows (segments, seqs) posted under each key asked, and rows' article ids.
        # Rows as segment << 64 | seq: ints, which the garbage collector does not walk. Keys
        # fetched without rows are only in `_posted_fetched`.
        self._posted_hits: dict[int, list[int]] = {}
        self._posted_fetched: set[int] = set()
        self._row_ids: dict[int, str | None] = {}
        # What each prefetched query (posted keys, bar of rarity, least shared) learned: the
        # counts' epoch then, whether a committed row shares enough of its rare keys, and the
        # queries that do (`prefetch_posted`); every query prefetched, and how many rows were
        # put before the last prefetch. How many times this batch took counts away.
        self._probes: dict[tuple[bytes, int, int], _Probe] = {}
        self._probed: set[bytes] = set()
        self._foreign_rows = 0
        self._decreases = 0
        self._grew_answer: tuple[object, object, bool] = (None, None, False)
        # Key frequencies (indexstore/frequencies.py): what this batch's puts change.
        self._pending_frequencies = PendingFrequencies(index.frequency_policy(), start.segment_ms)

    # -- reads ----------------------------------------------------------------------------

    def lookup(self, article_id: str) -> ArticleRecord | None:
        """The current record. Its shingles are not read: b"" for a committed record, those
        put for one put in this batch (read them with `shingles`)."""
        found = self._current(article_id)
        return None if found is None else found.record

    def shingles(self, article_id: str) -> bytes | None:
        """The shingles of the article's current record, None when it has none: none were
        put, or the record is not searchable (it came late, or its segment has expired)."""
        return self.shingles_many([article_id]).get(article_id)

    def shingles_many(self, article_ids: Sequence[str]) -> dict[str, bytes]:
        """`shingles` of many articles, the committed ones read with one multi-get per
        group of segments; ids without shingles are left out."""
        self._check()
        found: dict[str, bytes] = {}
        ids, segments, seqs = [], [], []
        for article_id in dict.fromkeys(article_ids):
            current = self._current(article_id)
            if current is None or current.seq is None:
                continue
            if article_id in self._pending:
                if current.record.shingles:
                    found[article_id] = current.record.shingles
                continue
            ids.append(article_id)
            segments.append(current.record.event_time_ms // self._segment_ms)
            seqs.append(current.seq)
        read = self._shingles_read
        rows = list(zip(segments, seqs, strict=True))
        unread = [row for row in dict.fromkeys(rows) if row not in read]
        if unread:
            raws = self._index.read_shingles([r[0] for r in unread], [r[1] for r in unread])
            read.update(zip(unread, raws, strict=True))
        for article_id, row in zip(ids, rows, strict=True):
            if raw := read[row]:
                found[article_id] = raw
        return found

    def frequencies(self, keys: np.ndarray) -> np.ndarray:
        """How many live rows of the window, this batch's puts included, carry each of these
        uint32 keys among the keys the index's `FrequencyPolicy` counts (zeros without one)."""
        self._check()
        keys = np.asarray(keys, dtype=np.uint32)
        if not self._pending_frequencies.kept:
            return np.zeros(len(keys), dtype=np.int64)
        first = first_segment(self._watermark, self._retention_ms, self._segment_ms)
        out = self._index.frequencies(keys, first)
        self._pending_frequencies.add_to(out, keys, first)
        return out

    def prefetch_records(self, article_ids: Iterable[str]) -> None:
        """Read the committed records of these ids with one multi-get per generation, so the
        batch's later `lookup()` and `put()` calls do not each go to RocksDB. Optional."""
        self._check()
        wanted = [a for a in dict.fromkeys(article_ids) if a not in self._committed]
        if wanted:
            found = self._index.read_many(wanted)
            for article_id in wanted:
                self._committed[article_id] = found.get(article_id)

    def prefetch_bands(self, queries: Sequence[bytes], min_shared: int) -> None:
        """Search the committed band tables for all these band keys at once, and fetch what
        the hits point at, so the batch's searches with bands do neither. Optional."""
        self._check()
        if min_shared < 1:
            raise IndexStoreError(f"min_shared_bands must be at least 1, got {min_shared}")
        wanted = [
            bands
            for bands in dict.fromkeys(queries)
            if bands and (bands, min_shared) not in self._band_hits
        ]
        for bands in wanted:
            enc.check_bands(len(bands))
        if not wanted:
            return
        found = self._index.band_nearest(wanted, min_shared)
        self.prefetch_records(c.article_id for hits in found for c in hits)
        for bands, hits in zip(wanted, found, strict=True):
            self._band_hits[bands, min_shared] = hits
        self._rows.probe_bands(wanted)

    def prefetch(self, probes: Sequence[tuple[int, bytes, int]]) -> None:
        """Search the committed tables for all probes at once and fetch what the hits point at."""
        self._check()
        wanted = list(dict.fromkeys(p[0] for p in probes if p[0] not in self._hits))
        if not wanted:
            return
        self._collect(wanted)
        self._rows.probe_fingerprints(wanted)

    def search(
        self,
        simhash: int,
        content_hash: bytes,
        event_time_ms: int,
        *,
        exclude_id: str | None = None,
        limit: int = 1,
        bands: bytes = b"",
        min_shared_bands: int = 2,
        band_limit: int = 4,
        posted: bytes = b"",
        min_shared_posted: int = 3,
        posted_limit: int = 4,
        posted_rarer_than: int = 0,
    ) -> SearchResult:
        """The live articles within distance k of `simhash` (not `exclude_id`, not older than
        the window), closest first, then exact, then earliest, at most `limit`.

        Given `bands`, also `band_matches`: the live articles not among those matches that
        share at least `min_shared_bands` band keys with `bands`, most shared first, then
        earliest event time, then article id, at most `band_limit`, each with its true
        distance (which may exceed k) and the bands it shares. Without bands, nothing of
        this is done.

        Given `posted` keys (little-endian u32), also `posted_matches`: the live articles in
        neither of those that are posted under at least `min_shared_posted` of them
        (`FrequencyPolicy.posted`), in the same order as band matches, at most
        `posted_limit`; with `posted_rarer_than`, only the keys that fewer rows of the window
        carry (`frequencies`) are asked."""
        self._check()
        clamped = event_time_ms > self._time_limit
        if clamped:
            event_time_ms = self._time_limit
        start = self._window_start()
        late = is_late(event_time_ms, start)
        # Which rows count, as of this search's window: the rankers ask it of each candidate.
        live = functools.partial(self._live_record, start=start)
        if simhash not in self._hits:
            self._collect([simhash])
        candidates: list[Candidate] = list(self._hits[simhash])
        candidates.extend(self._rows.near(simhash))
        matches = rank_near(candidates, live, content_hash, exclude_id, limit)
        band_matches: tuple[Match, ...] = ()
        if bands:
            matched = {m.article_id for m in matches}
            if exclude_id is not None:
                matched.add(exclude_id)
            band_matches = self._band_matches(
                simhash, content_hash, bands, min_shared_bands, band_limit, matched, live
            )
        posted_matches: tuple[Match, ...] = ()
        if posted:
            skipped = {m.article_id for m in (*matches, *band_matches)}
            if exclude_id is not None:
                skipped.add(exclude_id)
            sharing = self._posted_candidates(posted, min_shared_posted, posted_rarer_than)
            posted_matches = rank_shared(
                sharing, live, simhash, content_hash, min_shared_posted, skipped, posted_limit
            )
        return SearchResult(
            matches=matches,
            event_time_ms=event_time_ms,
            late=late,
            clamped=clamped,
            band_matches=band_matches,
            posted_matches=posted_matches,
        )

    def prefetch_posted(
        self, queries: Sequence[bytes], rarer_than: int = 0, min_shared: int = 1
    ) -> None:
        """Search the committed rows posted under all keys of these queries at once (with
        `rarer_than`, under those fewer rows of the window carry), so the batch's searches
        with posted keys do not each search. Optional.

        With `rarer_than`, each query also learns whether a row, committed or put later in
        this batch by another of these queries, can share `min_shared` of its keys rare now:
        while the counts only grow (`_counts_only_grew`), most of its searches are then
        answered without reading a count."""
        self._check()
        wanted = [q for q in dict.fromkeys(queries) if q]
        if not wanted:
            return
        sizes = [len(q) // 4 for q in wanted]
        keys = np.frombuffer(b"".join(wanted), dtype="<u4")
        owner = np.repeat(np.arange(len(wanted)), sizes)
        if rarer_than <= 0:
            self._fetch_posted(np.unique(keys).tolist())
            return
        asked, key_at = np.unique(keys, return_inverse=True)
        rare_asked = self.frequencies(asked) < rarer_than
        self._fetch_posted(asked[rare_asked].tolist())
        rare = rare_asked[key_at]
        keys, owner = keys[rare], owner[rare]
        epoch = self._frequency_epoch()
        committed = self._committed_sharing(keys, owner, len(wanted), min_shared)
        partners = _sharing_pairs(keys, owner, min_shared)
        for q, query in enumerate(wanted):
            self._probes[query, rarer_than, min_shared] = (
                epoch,
                bool(committed[q]),
                [wanted[other] for other in partners.get(q, ())],
            )
        # Rows put before these queries were known, or by queries of another prefetch, may
        # share keys with them unseen.
        self._probed = set(wanted)
        self._foreign_rows = self._rows.posted_rows

    def _committed_sharing(
        self, keys: np.ndarray, owner: np.ndarray, queries: int, min_shared: int
    ) -> np.ndarray:
        """For each of `queries` (owning `keys`, fetched), whether a committed row is posted
        under `min_shared` of its keys."""
        hits = self._posted_hits
        # Most keys are no committed row's: only those that are are walked.
        some = np.isin(keys, np.fromiter(hits, dtype=np.uint32, count=len(hits)))
        pairs = [
            (q << 128) | row
            for key, q in zip(keys[some].tolist(), owner[some].tolist(), strict=True)
            for row in hits[key]
        ]
        found = np.zeros(queries, dtype=bool)
        if len(pairs) >= min_shared:
            for pair, n in Counter(pairs).items():
                if n >= min_shared:
                    found[pair >> 128] = True
        return found

    def _fetch_posted(self, keys: Iterable[int]) -> None:
        missing = set(keys).difference(self._posted_fetched)
        if missing:
            found = self._index.posted_rows(list(missing))
            self._posted_fetched.update(missing)
            for key, (segments, seqs) in found.items():
                self._posted_hits[key] = [
                    (segment << 64) | seq for segment, seq in zip(segments, seqs, strict=True)
                ]

    def _frequency_epoch(self) -> tuple[int | None, int]:
        """What the window's counts have only grown since, while it stays the same: the
        first counted segment, and how many times this batch took counts away."""
        first = first_segment(self._watermark, self._retention_ms, self._segment_ms)
        return first, self._decreases

    def _counts_only_grew(self, since: tuple[int | None, int]) -> bool:
        """Whether every count is at least what it was at epoch `since`: nothing was taken
        away since, and the segments the window has left since then counted nothing."""
        now = self._frequency_epoch()
        first, decreases = now
        if decreases != since[1]:
            return False
        if first is None or first == since[0]:
            return True
        if self._grew_answer[:2] == (since, now):
            return self._grew_answer[2]
        grew = not (
            self._index.counted_between(since[0], first)
            or self._pending_frequencies.holds_rows(since[0], first)
        )
        # The answer stands while both epochs do: asked once per article, it changes
        # only when the window starts in another segment.
        self._grew_answer = (since, now, grew)
        return grew

    def _rules_out(self, posted: bytes, rarer_than: int, min_shared: int) -> bool:
        """Whether no row can be posted under `min_shared` of the keys of `posted` rare now,
        as its prefetch found (`prefetch_posted`), without reading a count: the counts have
        only grown since, so no key is rare now that was not then, and no row put since
        shares enough of them but those of the queries it named."""
        probe = self._probes.get((posted, rarer_than, min_shared))
        if probe is None or self._foreign_rows or not self._counts_only_grew(probe[0]):
            return False
        _, committed, partners = probe
        if committed:
            return False
        put = self._rows.posted_set
        return posted not in put and not any(p in put for p in partners)

    def _rare_keys(self, posted: bytes, rarer_than: int) -> list[int]:
        """The keys of `posted` fewer rows of the window carry than `rarer_than`."""
        ordered = np.frombuffer(posted, dtype="<u4")
        found: list[int] = ordered[self.frequencies(ordered) < rarer_than].tolist()
        return found

    def _posted_candidates(
        self, posted: bytes, min_shared: int, rarer_than: int
    ) -> list[BandCandidate]:
        """The rows, committed and this batch's, posted under at least `min_shared` of the
        keys of `posted` (with `rarer_than`, of those fewer rows of the window carry), live
        or not, with how many."""
        if rarer_than > 0:
            if self._rules_out(posted, rarer_than, min_shared):
                return []
            keys = self._rare_keys(posted, rarer_than)
            if len(keys) < min_shared:
                return []
        else:
            keys = np.frombuffer(posted, dtype="<u4").tolist()
        self._fetch_posted(keys)
        # Most keys of most articles are no other row's: fewer than `min_shared` keys with
        # rows leave no row enough of them, and nothing is counted.
        found = [rows for rows in map(self._posted_hits.get, keys) if rows]
        candidates = self._rows.posted_under(keys, min_shared)
        if len(found) < min_shared:
            return candidates
        shared: Counter[int] = Counter()
        for rows in found:
            shared.update(rows)
        rows = [row for row, n in shared.items() if n >= min_shared]
        if not rows:
            return candidates
        unknown = [row for row in rows if row not in self._row_ids]
        if unknown:
            ids = self._index.row_ids(
                [row >> 64 for row in unknown], [row & _SEQ for row in unknown]
            )
            self._row_ids.update(zip(unknown, ids, strict=True))
            self.prefetch_records(i for i in ids if i is not None)
        candidates.extend(
            BandCandidate(row & _SEQ, article_id, shared[row])
            for row in rows
            if (article_id := self._row_ids[row]) is not None
        )
        return candidates

    def _band_matches(
        self,
        simhash: int,
        content_hash: bytes,
        bands: bytes,
        min_shared: int,
        limit: int,
        skipped: set[str],
        live: LiveRecord,
    ) -> tuple[Match, ...]:
        hits = self._band_hits.get((bands, min_shared))
        if hits is None:  # not prefetched
            self.prefetch_bands([bands], min_shared)
            hits = self._band_hits[bands, min_shared]
        candidates = list(hits)
        candidates.extend(self._rows.sharing(bands, min_shared))
        return rank_sharing(
            candidates, live, simhash, content_hash, bands, min_shared, skipped, limit
        )

    def _live_record(self, seq: int, article_id: str, start: int | None) -> ArticleRecord | None:
        """The record a table row found, if the row is live: its article's current record still
        points at it (an update or a move leaves the old row behind) and is in the window."""
        current = self._current(article_id)
        if current is None or current.seq != seq:
            return None
        record = current.record
        if start is not None and record.event_time_ms < start:
            return None
        return record

    # -- writes ---------------------------------------------------------------------------

    def put(self, record: ArticleRecord) -> None:
        """Insert or replace; a record older than the window is kept but not searchable."""
        self._check()
        if len(record.content_hash) != 16:
            raise IndexStoreError(f"content_hash must be 16 bytes, got {len(record.content_hash)}")
        if not 0 <= record.simhash < 2**64:
            raise IndexStoreError(f"simhash must be an unsigned 64-bit int, got {record.simhash}")
        if len(record.sketch) > enc.MAX_SKETCH_BYTES:
            raise IndexStoreError(
                f"sketch must be at most {enc.MAX_SKETCH_BYTES} bytes, got {len(record.sketch)}"
            )
        enc.check_bands(len(record.bands))
        event_time_ms = record.event_time_ms
        if event_time_ms > self._time_limit:
            event_time_ms = self._time_limit
            record = dataclasses.replace(record, event_time_ms=event_time_ms)
        replaced = self._pending.get(record.article_id)
        if replaced is None:
            self._forget_committed(record.article_id)
        elif replaced.seq is not None:
            self._pending_frequencies.uncount(replaced.seq)
            self._decreases += 1
        start = self._window_start()
        late = is_late(event_time_ms, start)
        storage_time = event_time_ms if start is None else max(event_time_ms, start)
        gen = storage_time // self._generation_ms
        seq = None
        if not late:
            seq = self._next_seq
            self._next_seq += 1
            posted = self._rows.add(seq, record)
            if posted and posted not in self._probed:
                self._foreign_rows += 1
            if self._pending_frequencies.counts(record.payload):
                segment = event_time_ms // self._segment_ms
                self._pending_frequencies.count(segment, record.shingles, 1, seq)
            if self._watermark_follows_puts:
                self.advance_watermark(event_time_ms)
        self._pending[record.article_id] = Stored(record, seq, gen)

    def advance_watermark(self, time_ms: int) -> None:
        """Move the watermark to `time_ms` when that is later (never past the clamp limit)."""
        self._check()
        time_ms = min(time_ms, self._time_limit)
        if self._watermark is None or time_ms > self._watermark:
            self._watermark = time_ms

    def set_position(self, key: str, next_offset: int) -> None:
        """Record how far the caller has read `key`. A position never goes back, here or at
        the commit (IndexStore): a caller that decides out of offset order (a reorder
        window) reads a record after later ones."""
        self._check()
        self._positions[key] = max(self._positions.get(key, next_offset), next_offset)

    def commit(self, expire: bool = False) -> None:
        """Write everything of this batch in ONE atomic WriteBatch, then update the caches
        (`IndexStore._write` says in what order and why).

        With `expire`, the same as `commit()` then `expire()`, except that what that expiry
        would drop at once is never written. A replay of history moves the watermark by
        months per batch: written, every group of segments it passed would cost a column
        family created and dropped again.
        """
        self._check()
        gen_ms = self._generation_ms
        cut = None
        if expire and self._watermark is not None:
            cut = window_start(self._watermark, self._retention_ms)
        rows, added = self._rows.written(self._pending, cut)
        kept = self._pending
        if cut is not None:
            kept = {a: s for a, s in kept.items() if (s.generation + 1) * gen_ms > cut}
        records = RecordWrites(
            [article_id.encode() for article_id in kept],
            [enc.encode_record(stored.record, stored.seq) for stored in kept.values()],
            [stored.generation for stored in kept.values()],
        )
        try:
            self._index.write(
                Commit(
                    rows,
                    added,
                    self._dead_rows,
                    self._dead_records,
                    records,
                    self._positions,
                    self._watermark,
                    self._next_seq,
                    self._pending_frequencies.written(cut),
                )
            )
        finally:
            self._close()
        if expire:
            self._index.expire()

    def abort(self) -> None:
        if self._open:
            self._close()

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and self._open:
            self.commit()
        else:
            self.abort()

    # -- internals ------------------------------------------------------------------------

    def _check(self) -> None:
        # Closing the store aborts its open batch, so this one flag covers both.
        if not self._open:
            raise IndexStateError("this batch is finished (committed or aborted), or closed")

    def _close(self) -> None:
        self._open = False
        self._index.finished(self)

    def _window_start(self) -> int | None:
        if self._watermark is None:
            return None
        return window_start(self._watermark, self._retention_ms)

    def _current(self, article_id: str) -> Stored | None:
        if article_id in self._pending:
            return self._pending[article_id]
        if article_id not in self._committed:
            self._committed[article_id] = self._index.read(article_id)
        return self._committed[article_id]

    def _forget_committed(self, article_id: str) -> None:
        """Schedule the deletion of the committed row and record this put replaces."""
        committed = self._current(article_id)
        if committed is None:
            return
        if committed.seq is not None:
            segment = committed.record.event_time_ms // self._segment_ms
            self._dead_rows.append(DeadRow(segment, committed.seq))
            if self._pending_frequencies.counts(committed.record.payload):
                shingles = self._index.read_shingles([segment], [committed.seq])[0]
                self._pending_frequencies.count(segment, shingles or b"", -1)
                self._decreases += 1
        self._dead_records.append(DeadRecord(committed.generation, article_id.encode()))

    def _collect(self, simhashes: list[int]) -> None:
        """Committed neighbours of `simhashes`, with their article ids and records fetched."""
        found = self._index.nearest(simhashes)
        self.prefetch_records(hit.article_id for hits in found for hit in hits)
        for simhash, hits in zip(simhashes, found, strict=True):
            self._hits[simhash] = hits


def _sharing_pairs(keys: np.ndarray, owner: np.ndarray, min_shared: int) -> dict[int, list[int]]:
    """For each owner, the other owners holding `min_shared` or more of its keys (u32 keys,
    each owner's distinct; owners below 2**32), in no particular order."""
    partners: dict[int, list[int]] = defaultdict(list)
    if len(keys) < 2:
        return partners
    # By key: one sort of key << 32 | owner is several times faster than an argsort.
    entries = np.sort((keys.astype(np.uint64) << np.uint64(32)) | owner.astype(np.uint64))
    keys, owner = entries >> np.uint64(32), (entries & np.uint64(0xFFFFFFFF)).astype(np.int64)
    # Only keys two or more owners hold are walked: most are one owner's.
    same = keys[1:] == keys[:-1]
    repeated = np.zeros(len(keys), dtype=bool)
    repeated[1:] |= same
    repeated[:-1] |= same
    keys, owner = keys[repeated], owner[repeated]
    if not len(keys):
        return partners
    # Every ordered pair of entries of each run of one key, made at once: entry i of a run
    # of `size` entries from `start` is paired with each of start .. start + size - 1.
    starts_run = np.ones(len(keys), dtype=bool)
    starts_run[1:] = keys[1:] != keys[:-1]
    start = np.flatnonzero(starts_run)
    size = np.diff(np.append(start, len(keys)))
    run_size, run_start = np.repeat(size, size), np.repeat(start, size)
    first = np.repeat(np.arange(len(keys)), run_size)
    offset = np.arange(len(first)) - np.repeat(np.cumsum(run_size) - run_size, run_size)
    second = np.repeat(run_start, run_size) + offset
    a, b = owner[first], owner[second]
    differ = a != b
    width = int(owner.max()) + 1
    pairs, shared = np.unique(a[differ] * width + b[differ], return_counts=True)
    enough = pairs[shared >= min_shared]
    for a_owner, b_owner in zip((enough // width).tolist(), (enough % width).tolist(), strict=True):
        partners[a_owner].append(b_owner)
    return partners
