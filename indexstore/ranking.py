"""The order of a search's answers: which candidates become matches, and in what order.

A search gathers candidate rows (committed and the batch's own, live or not) and hands them
here with `live`, which says the record a row stands for when the row is live (its article's
current record still points at it, in the window) and None otherwise. The orders are the
contract callers decide by, so they are kept in one place, apart from how the candidates were
found: by distance, then exact content before near, then earliest, then row (`rank_near`); by
band keys shared, most first, then earliest, then article id (`rank_sharing`); likewise by
posted keys shared (`rank_shared`). It may import
indexstore.bands, .commit and .model.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable

from indexstore.bands import shared_bands
from indexstore.commit import BandCandidate, Candidate
from indexstore.model import ArticleRecord, Match

# The record a row (seq, article id) stands for if the row is live, else None.
LiveRecord = Callable[[int, str], ArticleRecord | None]


def rank_near(
    candidates: Iterable[Candidate],
    live: LiveRecord,
    content_hash: bytes,
    exclude_id: str | None,
    limit: int,
) -> tuple[Match, ...]:
    """The live candidates but `exclude_id`, closest first, then exact, then earliest, at
    most `limit`."""
    ranked = []
    for seq, article_id, distance in candidates:
        if article_id == exclude_id:
            continue
        record = live(seq, article_id)
        if record is None:
            continue
        exact = record.content_hash == content_hash
        ranked.append(
            (
                (distance, not exact, record.event_time_ms, seq),
                Match(
                    article_id,
                    distance,
                    exact,
                    record.event_time_ms,
                    record.payload,
                    record.sketch,
                ),
            )
        )
    ranked.sort(key=lambda item: item[0])
    return tuple(m for _, m in ranked[: max(limit, 0)])


def rank_sharing(
    candidates: Iterable[BandCandidate],
    live: LiveRecord,
    simhash: int,
    content_hash: bytes,
    bands: bytes,
    min_shared: int,
    skipped: Container[str],
    limit: int,
) -> tuple[Match, ...]:
    """The live candidates not `skipped` that share at least `min_shared` band keys with
    `bands`, most shared first, then earliest, then article id, at most `limit`, each with
    its true distance from `simhash` (which may exceed k) and the keys it shares."""

    def shared(record: ArticleRecord, _: int) -> int:
        # The tables' count is an upper bound: the record's keys say how many are shared.
        return shared_bands(record.bands, bands)

    return rank_shared(candidates, live, simhash, content_hash, min_shared, skipped, limit, shared)


def rank_shared(
    candidates: Iterable[BandCandidate],
    live: LiveRecord,
    simhash: int,
    content_hash: bytes,
    min_shared: int,
    skipped: Container[str],
    limit: int,
    count: Callable[[ArticleRecord, int], int] = lambda _, found: found,
) -> tuple[Match, ...]:
    """The live candidates not `skipped` sharing at least `min_shared` keys with the query,
    most first, then earliest, then article id, at most `limit`, each with its true distance
    from `simhash`. How many a candidate shares is `count` of its record and of what the
    search counted (by default that count: exact for posted keys)."""
    ranked = []
    for seq, article_id, found in candidates:
        if article_id in skipped:
            continue
        record = live(seq, article_id)
        if record is None:
            continue
        shared = count(record, found)
        if shared < min_shared:
            continue
        ranked.append(
            (
                (-shared, record.event_time_ms, article_id),
                Match(
                    article_id,
                    (record.simhash ^ simhash).bit_count(),
                    record.content_hash == content_hash,
                    record.event_time_ms,
                    record.payload,
                    record.sketch,
                    shared,
                ),
            )
        )
    ranked.sort(key=lambda item: item[0])
    return tuple(m for _, m in ranked[: max(limit, 0)])
