"""The committed search: each query's closest committed rows within k, with their article ids.

It searches the in-memory tables and resolves the hits' article ids through the catalog; a
hit whose row is no longer stored is left out. It may import numpy and indexstore.tables,
.catalog and .commit; the store hands it both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from indexstore.catalog import Catalog
from indexstore.commit import BandCandidate, Candidate
from indexstore.tables import Hits, SearchTables, first_per_group

# A search considers at most this many committed entries per query: the closest, earliest
# first. Without a bound, a window holding tens of thousands of near-identical short texts
# (stock quotes, one-line questions) made every query fetch all of them: a `check` of the
# 77,300 AFQMC questions at k = 12 grew to 22 GB before the kernel killed it. Callers that
# want a decision use a handful of matches.
MAX_HITS_PER_QUERY = 256
# Likewise for rows sharing band keys: those sharing most (then the earliest inserted). A
# caller verifies a handful; only a window where more than this many articles share the
# query's most-shared bands (near-identical texts) could miss the earliest of them.
MAX_BAND_HITS_PER_QUERY = 256
# Likewise for the rows posted under one key: the earliest inserted. A key a caller asks of
# is one few stories carry; only a story reposted more often than this could lose a copy.
MAX_POSTED_ROWS_PER_KEY = 256


def nearest(
    tables: SearchTables, catalog: Catalog, simhashes: Sequence[int]
) -> list[list[Candidate]]:
    """For each simhash, its committed rows within k: the MAX_HITS_PER_QUERY closest, of
    those whose article id is still stored."""
    queries = np.array(simhashes, dtype=np.uint64)
    near = tables.search(queries, per_fingerprint=MAX_HITS_PER_QUERY)
    hits = _closest(near, tables.seq, MAX_HITS_PER_QUERY)
    ids = _row_ids(tables, catalog, hits.row)
    found: list[list[Candidate]] = [[] for _ in simhashes]
    seqs = tables.seq[hits.row].tolist()
    for q, article_id, seq, d in zip(
        hits.query.tolist(), ids, seqs, hits.distance.tolist(), strict=True
    ):
        if article_id is not None:
            found[q].append(Candidate(seq, article_id, d))
    return found


def band_nearest(
    tables: SearchTables, catalog: Catalog, queries: Sequence[bytes], min_shared: int
) -> list[list[BandCandidate]]:
    """For each query's band keys, the committed rows sharing at least `min_shared` of them
    (an upper-bound count, see indexstore.bands): the MAX_BAND_HITS_PER_QUERY sharing most,
    of those whose article id is still stored."""
    query, rows, shared = tables.band_search(queries, min_shared, MAX_BAND_HITS_PER_QUERY)
    found: list[list[BandCandidate]] = [[] for _ in queries]
    if not len(rows):
        return found
    seqs = tables.seq[rows].tolist()
    ids = _row_ids(tables, catalog, rows)
    for q, seq, article_id, n in zip(query.tolist(), seqs, ids, shared.tolist(), strict=True):
        if article_id is not None:
            found[q].append(BandCandidate(seq, article_id, n))
    return found


def _row_ids(tables: SearchTables, catalog: Catalog, rows: np.ndarray) -> list[str | None]:
    """The article id of each row (None: no longer stored), each distinct row read once: the
    queries of one batch share neighbours wherever a feed repeats itself (a reuters `check`
    holding the whole feed had 74,391 hits on 9,363 distinct rows), and every read is a
    RocksDB lookup."""
    if not len(rows):
        return []
    distinct, position = np.unique(rows, return_inverse=True)
    ids = catalog.row_ids(tables.seg[distinct].tolist(), tables.seq[distinct].tolist())
    return [ids[i] for i in position.tolist()]


def _closest(hits: Hits, seq: np.ndarray, limit: int) -> Hits:
    """Of each query's hits, the `limit` closest (ties: smallest sequence number, the earliest
    inserted), so one query's cost is bounded whatever the window holds."""
    if len(hits.query) <= limit:
        return hits
    keep = np.sort(first_per_group(limit, (hits.query,), (hits.distance, seq[hits.row])))
    return Hits(hits.query[keep], hits.row[keep], hits.distance[keep])


def posted_rows(
    tables: SearchTables, keys: Sequence[int]
) -> dict[int, tuple[list[int], list[int]]]:
    """For each of these distinct u32 keys, the (segments, seqs) of the live committed rows
    posted under it: the MAX_POSTED_ROWS_PER_KEY earliest inserted. Keys no row has are left
    out."""
    if not len(keys):
        return {}
    asked = np.array(keys, dtype=np.uint32)
    query, rows = tables.posting_search(asked)
    if not len(rows):
        return {}
    keep = first_per_group(MAX_POSTED_ROWS_PER_KEY, (query,), (tables.seq[rows],))
    query, rows = query[keep], rows[keep]
    # The rows come grouped by key: each key's are one slice of the lists.
    starts = np.flatnonzero(np.diff(query, prepend=-1))
    ends = np.append(starts[1:], len(query)).tolist()
    segs, seqs = tables.seg[rows].tolist(), tables.seq[rows].tolist()
    return {
        key: (segs[begin:end], seqs[begin:end])
        for key, begin, end in zip(
            asked[query[starts]].tolist(), starts.tolist(), ends, strict=True
        )
    }
