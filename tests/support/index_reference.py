"""A brute-force model of the index's semantics, for property tests against the real one,
and the real index on disk such a test runs its programs on (`program_index`).

Plain dicts and a linear scan: slow and obviously right.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from unittest import mock

import numpy as np

from indexstore import ArticleRecord, IndexOptions, IndexStore, Match, SearchResult, snapshot

# The programs' window is tiny, so a few dozen steps cross segments and expire some.
NOW_MS = 20_000
SEGMENT_MS = 1_000
RETENTION_MS = 5_000
SKEW_MS = 2_000


class PostedBytes:
    """A `FrequencyPolicy` that counts nothing and posts each row under the distinct bytes of
    its shingles: few keys, so random programs share them often."""

    def counts(self, payload: bytes) -> bool:
        return False

    def keys(self, shingles: bytes) -> np.ndarray:
        return np.empty(0, dtype=np.uint32)

    def posted(self, shingles: bytes) -> bytes:
        return np.array(sorted(set(shingles)), dtype="<u4").tobytes()


POSTED_BYTES = PostedBytes()


def shared_bands(a: bytes, b: bytes) -> int:
    """Band i is shared when both have a key i and the two are equal."""
    return sum(a[i : i + 4] == b[i : i + 4] for i in range(0, min(len(a), len(b)) // 4 * 4, 4))


@dataclass
class ReferenceIndex:
    options: IndexOptions
    now_ms: int
    # article id -> (record, seq or None when not searchable, storage generation)
    records: dict[str, tuple[ArticleRecord, int | None, int]] = field(default_factory=dict)
    watermark: int | None = None
    next_seq: int = 0

    @property
    def generation_ms(self) -> int:
        s = self.options.segment_ms
        return -(-self.options.retention_ms // s) * s

    def snapshot(self) -> ReferenceIndex:
        return copy.deepcopy(self)

    def window_start(self) -> int | None:
        return None if self.watermark is None else self.watermark - self.options.retention_ms

    def clamp(self, t: int) -> tuple[int, bool]:
        limit = self.now_ms + self.options.future_skew_ms
        return (limit, True) if t > limit else (t, False)

    def search(
        self,
        simhash: int,
        content_hash: bytes,
        t: int,
        exclude_id: str | None = None,
        limit: int = 1,
        bands: bytes = b"",
        min_shared_bands: int = 2,
        band_limit: int = 4,
        posted: tuple[int, ...] = (),
        min_shared_posted: int = 3,
        posted_limit: int = 4,
    ) -> SearchResult:
        t, clamped = self.clamp(t)
        start = self.window_start()
        ranked = []
        for article_id, (rec, seq, _) in self.records.items():
            if seq is None or article_id == exclude_id:
                continue
            if start is not None and rec.event_time_ms < start:
                continue
            d = (rec.simhash ^ simhash).bit_count()
            if d > self.options.max_distance:
                continue
            exact = rec.content_hash == content_hash
            ranked.append(
                (
                    (d, not exact, rec.event_time_ms, seq),
                    Match(article_id, d, exact, rec.event_time_ms, rec.payload, rec.sketch),
                )
            )
        ranked.sort(key=lambda x: x[0])
        matches = tuple(m for _, m in ranked[:limit])
        skipped = {m.article_id for m in matches} | {exclude_id}

        def banded_with(rec: ArticleRecord) -> int:
            return shared_bands(rec.bands, bands) if rec.bands else 0

        banded = (
            self._sharing(
                simhash, content_hash, start, skipped, banded_with, min_shared_bands, band_limit
            )
            if bands
            else ()
        )
        skipped |= {m.article_id for m in banded}

        def posted_with(rec: ArticleRecord) -> int:
            return len(set(rec.shingles) & set(posted))

        by_posted = (
            self._sharing(
                simhash, content_hash, start, skipped, posted_with, min_shared_posted, posted_limit
            )
            if posted
            else ()
        )
        return SearchResult(matches, t, start is not None and t < start, clamped, banded, by_posted)

    def _sharing(
        self,
        simhash: int,
        content_hash: bytes,
        start: int | None,
        skipped: set[str | None],
        shared_with: Callable[[ArticleRecord], int],
        least: int,
        limit: int,
    ) -> tuple[Match, ...]:
        """The live records not `skipped` sharing at least `least` keys by `shared_with`,
        most first, then earliest, then article id, at most `limit`."""
        ranked: list[tuple[tuple[int, int, str], Match]] = []
        for article_id, (rec, seq, _) in self.records.items():
            if seq is None or article_id in skipped:
                continue
            if start is not None and rec.event_time_ms < start:
                continue
            shared = shared_with(rec)
            if shared < least:
                continue
            d = (rec.simhash ^ simhash).bit_count()
            match = Match(
                article_id,
                d,
                rec.content_hash == content_hash,
                rec.event_time_ms,
                rec.payload,
                rec.sketch,
                shared,
            )
            ranked.append(((-shared, rec.event_time_ms, article_id), match))
        ranked.sort(key=lambda x: x[0])
        return tuple(m for _, m in ranked[:limit])

    def put(self, record: ArticleRecord) -> None:
        t, clamped = self.clamp(record.event_time_ms)
        if clamped:
            record = replace(record, event_time_ms=t)
        start = self.window_start()
        late = start is not None and t < start
        storage = t if start is None else max(t, start)
        seq = None
        if not late:
            seq = self.next_seq
            self.next_seq += 1
            self.watermark = t if self.watermark is None else max(self.watermark, t)
        self.records[record.article_id] = (record, seq, storage // self.generation_ms)

    def lookup(self, article_id: str) -> ArticleRecord | None:
        found = self.records.get(article_id)
        return None if found is None else found[0]

    def stored(self, article_id: str) -> ArticleRecord | None:
        """The record as read back from the index: without its shingles, kept apart."""
        found = self.lookup(article_id)
        return None if found is None else replace(found, shingles=b"")

    def shingles(self, article_id: str) -> bytes | None:
        """The shingles kept for an article: those of its current record while it is
        searchable (not late, its segment not expired), if any."""
        found = self.records.get(article_id)
        if found is None or found[1] is None or not found[0].shingles:
            return None
        return found[0].shingles

    def expire(self, before_ms: int | None) -> list[int]:
        if before_ms is None:
            if self.watermark is None:
                return []
            before_ms = self.watermark - self.options.retention_ms
        seg = self.options.segment_ms
        dropped = set()
        for article_id, (rec, seq, gen) in list(self.records.items()):
            if (gen + 1) * self.generation_ms <= before_ms:
                del self.records[article_id]
                continue
            sid = rec.event_time_ms // seg
            if seq is not None and (sid + 1) * seg <= before_ms:
                self.records[article_id] = (rec, None, gen)
                dropped.add(sid)
        return sorted(dropped)


@dataclass
class ProgramIndex:
    """A real index on disk beside its model: what a property test runs a program on."""

    path: Path
    options: IndexOptions
    ref: ReferenceIndex
    store: IndexStore

    def reopen(self, discard_snapshot: bool = False) -> IndexStore:
        """Close and open it again, after throwing its tables' snapshot away if asked (the
        tables are then rebuilt from the records)."""
        self.store.close()
        if discard_snapshot:
            snapshot.discard(self.path)
        self.store = IndexStore.open(
            self.path, self.options, clock=lambda: NOW_MS, frequencies=POSTED_BYTES
        )
        return self.store


def program_options(k: int, expected: int, segment_ms: int = SEGMENT_MS) -> IndexOptions:
    return IndexOptions(
        max_distance=k,
        segment_ms=segment_ms,
        retention_ms=RETENTION_MS,
        future_skew_ms=SKEW_MS,
        expected_articles=expected,
        memory_bytes=8 << 20,
    )


@contextlib.contextmanager
def program_index(k: int, expected: int, segment_ms: int = SEGMENT_MS) -> Iterator[ProgramIndex]:
    options = program_options(k, expected, segment_ms)
    # These windows are tiny: without the patch a tables layout would be searched by a scan.
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch("indexstore.tables.scan_break_even", return_value=0),
    ):
        store = IndexStore.open(tmp, options, clock=lambda: NOW_MS, frequencies=POSTED_BYTES)
        index = ProgramIndex(Path(tmp), options, ReferenceIndex(options, NOW_MS), store)
        try:
            yield index
        finally:
            index.store.close()
