"""A batch's own rows: what it put, searchable by its later searches before anything is written.

`Batch` adds a row for each searchable record it puts (seq, article id, segment, fingerprint,
band keys, shingles), finds here the rows near a search's fingerprint or sharing its band keys
beside the committed ones, and at commit takes the rows still current as its `Commit`'s rows.
Rows are kept as columns, so a put costs no object.

Scanning every row for every search would make a batch cost time quadratic in its length. So
the fingerprints a batch prefetches (its probes) are searched among themselves once, as they
come, in tables of their own: a search for a probe finds the rows near it by dict lookups, and
only the rows of fingerprints no probe has are scanned. Band keys are done the same way.

Whether a row found here is live (its article's current record still points at it, inside the
window) is for the batch to say: this module knows rows, not records. It may import numpy and
indexstore.bands, .commit, .layout, .model, .postings and .tables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from indexstore.bands import BandTables, shared_bands
from indexstore.commit import BandCandidate, Candidate, SegmentRows, Stored, TableRows
from indexstore.layout import Layout
from indexstore.model import ArticleRecord
from indexstore.postings import new_postings
from indexstore.tables import SearchTables


class PendingRows:
    """The rows put in one batch, in insertion order, with the probes that find them fast."""

    def __init__(
        self,
        layout: Layout,
        max_distance: int,
        segment_ms: int,
        posted: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self._k = max_distance
        self._segment_ms = segment_ms
        # Row i is the seq _seq[i] of article _article_id[i] in segment _segment[i], with
        # fingerprint _fp[i], band keys _bands[i] and shingles _shingles[i].
        self._seq: list[int] = []
        self._article_id: list[str] = []
        self._segment: list[int] = []
        self._fp: list[int] = []
        self._bands: list[bytes] = []
        self._shingles: list[bytes] = []
        self._by_fp: dict[int, list[int]] = defaultdict(list)
        # The rows above by their band keys, and those whose keys are no band probe's.
        self._by_bands: dict[bytes, list[int]] = defaultdict(list)
        self._band_unprobed: list[int] = []
        # Probes -> the probes within k of them, so a search finds the rows by dict lookups
        # instead of a scan; the rows of fingerprints no probe has are scanned.
        self._neighbours: dict[int, list[int]] = {}
        self._unprobed: list[int] = []
        # The probes, searchable among themselves (row i is _probes[i]): each prefetch searches
        # only its new probes, so a batch costs time linear in its length, not quadratic.
        self._probes: list[int] = []
        self._among = SearchTables(layout)
        # The same for band keys: the band probes (row i of _bands_among is _band_probes[i])
        # and, for each, the probes sharing keys with it and how many (an upper bound).
        self._band_probes: list[bytes] = []
        self._bands_among = BandTables()
        self._band_neighbours: dict[bytes, list[tuple[int, int]]] = {}
        # The rows by each key they are posted under (`FrequencyPolicy.posted`).
        self._posted = posted
        self._by_posted = new_postings()
        self._posted_keys: list[bytes] = []
        # The distinct posted keys of the rows, each a row's whole set.
        self.posted_set: set[bytes] = set()

    def add(self, seq: int, record: ArticleRecord) -> bytes:
        """Row `seq` of `record` (its event time already clamped), searchable at once; its
        posted keys."""
        n = len(self._fp)
        self._fp.append(record.simhash)
        self._by_fp[record.simhash].append(n)
        if record.simhash not in self._neighbours:
            self._unprobed.append(n)
        self._seq.append(seq)
        self._article_id.append(record.article_id)
        self._segment.append(record.event_time_ms // self._segment_ms)
        self._bands.append(record.bands)
        self._shingles.append(record.shingles)
        if record.bands:
            self._by_bands[record.bands].append(n)
            if record.bands not in self._band_neighbours:
                self._band_unprobed.append(n)
        posted = b""
        if self._posted is not None and record.shingles:
            posted = self._posted(record.shingles)
            if posted:
                self._by_posted.add(n, np.frombuffer(posted, dtype="<u4"))
        self._posted_keys.append(posted)
        if posted:
            self.posted_set.add(posted)
        return posted

    def probe_fingerprints(self, fingerprints: Sequence[int]) -> None:
        """Make the new ones of `fingerprints` probes, searched among all probes at once."""
        fresh = [fp for fp in fingerprints if fp not in self._neighbours]
        if not fresh:
            return
        first = len(self._probes)
        self._probes += fresh
        fps = np.array(fresh, dtype=np.uint64)
        self._among.append(
            fps, np.zeros(len(fresh), dtype=np.int64), np.arange(first, len(self._probes))
        )
        for fp in fresh:
            self._neighbours[fp] = []
        hits = self._among.search(fps)
        for q, r in zip(hits.query.tolist(), hits.row.tolist(), strict=True):
            probe, near = fresh[q], self._probes[r]
            self._neighbours[probe].append(near)
            if r < first:
                # An earlier probe, whose list was made before this one existed.
                self._neighbours[near].append(probe)
        self._unprobed = [i for i in self._unprobed if self._fp[i] not in self._neighbours]

    def probe_bands(self, queries: Sequence[bytes]) -> None:
        """Make the new ones of `queries` band probes, searched among all probes at once."""
        fresh = [bands for bands in queries if bands not in self._band_neighbours]
        if not fresh:
            return
        first = len(self._band_probes)
        self._band_probes += fresh
        for bands in fresh:
            self._band_neighbours[bands] = []
        self._bands_among.append(np.arange(first, len(self._band_probes), dtype=np.uint32), fresh)
        query, row, shared = self._bands_among.search(fresh)
        for q, r, n in zip(query.tolist(), row.tolist(), shared.tolist(), strict=True):
            self._band_neighbours[fresh[q]].append((r, n))
            if r < first:
                # An earlier probe, whose list was made before this one existed.
                self._band_neighbours[self._band_probes[r]].append((first + q, n))
        self._band_unprobed = [
            i for i in self._band_unprobed if self._bands[i] not in self._band_neighbours
        ]

    def near(self, simhash: int) -> list[Candidate]:
        """The rows within k of `simhash`, live or not, with their distances."""
        if not self._fp:
            return []
        row_fp = self._fp
        neighbours = self._neighbours.get(simhash)
        if neighbours is None:
            close = np.flatnonzero(
                np.bitwise_count(np.array(row_fp, dtype=np.uint64) ^ np.uint64(simhash)) <= self._k
            ).tolist()
        else:
            close = [i for fp in neighbours for i in self._by_fp.get(fp, ())]
            close.extend(i for i in self._unprobed if (row_fp[i] ^ simhash).bit_count() <= self._k)
        row_seq, row_id = self._seq, self._article_id
        return [Candidate(row_seq[i], row_id[i], (row_fp[i] ^ simhash).bit_count()) for i in close]

    def sharing(self, bands: bytes, min_shared: int) -> list[BandCandidate]:
        """The rows that may share `min_shared` or more band keys with `bands` (a probe's),
        live or not: the caller counts the keys its live records really share."""
        if not self._bands:
            return []
        # The rows of the probes sharing enough keys (an upper bound), and those of no probe,
        # counted here.
        probes, rows_by_bands = self._band_probes, self._by_bands
        close = [
            i
            for p, n in self._band_neighbours[bands]
            if n >= min_shared
            for i in rows_by_bands.get(probes[p], ())
        ]
        close += [
            i for i in self._band_unprobed if shared_bands(self._bands[i], bands) >= min_shared
        ]
        return [BandCandidate(self._seq[i], self._article_id[i], 0) for i in close]

    @property
    def posted_rows(self) -> int:
        """How many rows have posted keys."""
        return sum(1 for posted in self._posted_keys if posted)

    def posted_under(self, keys: Sequence[int], min_shared: int) -> list[BandCandidate]:
        """The rows posted under at least `min_shared` of these keys, live or not, with how
        many of them."""
        shared = self._by_posted.sharing(np.array(keys, dtype=np.uint32), min_shared)
        return [BandCandidate(self._seq[i], self._article_id[i], n) for i, n in shared]

    def written(
        self, current: Mapping[str, Stored], cut: int | None
    ) -> tuple[dict[int, SegmentRows], TableRows]:
        """The rows a commit writes, by segment and for the search tables: those still their
        article's `current` row (a row replaced later in the same batch is never written) in
        a segment that ends after `cut` (None: every segment)."""
        seg_ms = self._segment_ms
        by_segment: dict[int, list[int]] = defaultdict(list)
        row_ids = self._article_id
        for i, (seq, article_id, sid) in enumerate(
            zip(self._seq, row_ids, self._segment, strict=True)
        ):
            if current[article_id].seq == seq and (cut is None or (sid + 1) * seg_ms > cut):
                by_segment[sid].append(i)
        all_fp = np.array(self._fp, dtype=np.uint64)
        all_seq = np.array(self._seq, dtype=np.uint64)
        row_shingles = self._shingles
        rows = {
            sid: SegmentRows(
                all_fp[idx],
                all_seq[idx],
                [row_ids[i].encode() for i in idx],
                [row_shingles[i] for i in idx],
            )
            for sid, idx in by_segment.items()
        }
        idx = sorted(i for ids in by_segment.values() for i in ids)
        added = TableRows(
            all_fp[idx],
            np.array(self._segment, dtype=np.int64)[idx],
            all_seq[idx],
            [self._bands[i] for i in idx],
            [row_shingles[i] for i in idx],
            None if self._posted is None else [self._posted_keys[i] for i in idx],
        )
        return rows, added
