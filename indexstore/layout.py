"""The search layout: how 64-bit fingerprints are split into blocks and keyed into tables.

`choose_layout` is the one place that picks it from k and the expected number of articles.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from indexstore.model import DEFAULT_MAX_TABLE_BYTES
from indexstore.value import value_type

FINGERPRINT_BITS = 64

# The cost model of `choose_layout`, in microseconds per query on one core: rough figures
# from `newsdedup bench index` and micro-timings of the probe kernel on this project's 2-core
# machines (batches of ~1000 queries); only their ratios matter.
PROBE_US = 0.3  # one table probed: the fixed cost of its vectorized steps around the kernel
BUCKET_US = 0.01  # one bucket of one run looked up: two offsets read, a cache miss or two
CANDIDATE_US = 0.0005  # one candidate verified: XOR and popcount on a contiguous range
SCAN_US = 0.0003  # one row compared in a plain scan
MEMORY_US_PER_BYTE = 0.25  # what one byte of table memory per article is worth to us
MAX_TABLES = 300
MAX_BUCKETS_PER_PROBE = 4096  # keys within the probe radius; beyond this a layout is not tried
# A run of n rows is bucketed by the top log2(n / ROWS_PER_BUCKET) bits of each key (at most
# the key's width), so a bucket holds a few rows and the offsets cost ~1 B per row and table.
ROWS_PER_BUCKET = 4


_U64 = np.uint64


@value_type
class BlockMove:
    """Bits [shift, shift + width) of the fingerprint go to bits [to, to + width)."""

    shift: int
    width: int
    to: int


@dataclass(frozen=True, slots=True)
class Table:
    """One permuted table: a bit permutation that puts its kept blocks on top.

    Tables hold permuted fingerprints sorted by their top `key_bits` (the key), so a probe
    is a range search and a candidate's distance is popcount(permuted query ^ entry): a
    permutation of bit positions preserves Hamming distance.
    """

    moves: tuple[BlockMove, ...]
    key_bits: int
    rotation: int | None  # when the permutation is a plain left rotation (kept blocks adjacent)

    def permute(self, fingerprints: np.ndarray) -> np.ndarray:
        if self.rotation is not None:
            return _rotate_left(fingerprints, self.rotation)
        out = np.zeros(fingerprints.shape, dtype=_U64)
        for m in self.moves:
            out |= ((fingerprints >> _U64(m.shift)) & _U64((1 << m.width) - 1)) << _U64(m.to)
        return out

    def unpermute(self, permuted: np.ndarray) -> np.ndarray:
        if self.rotation is not None:
            return _rotate_left(permuted, (FINGERPRINT_BITS - self.rotation) % FINGERPRINT_BITS)
        out = np.zeros(permuted.shape, dtype=_U64)
        for m in self.moves:
            out |= ((permuted >> _U64(m.to)) & _U64((1 << m.width) - 1)) << _U64(m.shift)
        return out


def _rotate_left(values: np.ndarray, r: int) -> np.ndarray:
    if r == 0:
        return values.copy()
    return (values << _U64(r)) | (values >> _U64(FINGERPRINT_BITS - r))


@dataclass(frozen=True, slots=True)
class Layout:
    """`blocks == 0` means no tables: every query scans all rows (small n or large k).

    Otherwise each table is keyed by `kept` of the `blocks` blocks and probed with every key
    within Hamming distance `radius` of the query's key (0: the key itself).
    """

    max_distance: int
    blocks: int
    tables: tuple[Table, ...]
    expected_candidates: float
    kept: int = 0
    radius: int = 0
    expected_buckets: float = 0.0

    def describe(self) -> str:
        if not self.blocks:
            return f"scan (k={self.max_distance})"
        bits = min(t.key_bits for t in self.tables)
        probe = f", keys probed within radius {self.radius}" if self.radius else ""
        return (
            f"pigeonhole b={self.blocks} k={self.max_distance}: {len(self.tables)} tables, "
            f">={bits}-bit keys{probe}, ~{_estimate(self.expected_candidates)} candidates/query"
        )

    @property
    def table_bytes_per_article(self) -> int:
        return table_bytes_per_article(len(self.tables))


def table_bytes_per_article(tables: int) -> int:
    # a permuted fingerprint and ~1 B of bucket offsets per table, a row id in the first
    return 9 * tables + 4 if tables else 0


def block_widths(blocks: int) -> list[int]:
    """Split 64 bits into `blocks` contiguous blocks as evenly as possible."""
    base, extra = divmod(FINGERPRINT_BITS, blocks)
    return [base + 1 if i < extra else base for i in range(blocks)]


def probe_radius(max_distance: int, blocks: int, kept: int) -> int:
    """The largest distance the closest `kept` blocks can be at, for a neighbour within k.

    d <= k bits spread over `blocks` blocks; the `kept` blocks with the fewest differing bits
    hold the most when the bits are spread evenly: every block floor(k / b), and k mod b
    blocks one more, of which the least-loaded `kept` get max(0, kept - (b - k mod b)).
    kept = b - k with b > k gives 0: Manku's exact-key probe.
    """
    per_block, extra = divmod(max_distance, blocks)
    return kept * per_block + max(0, kept - (blocks - extra))


def keys_within(bits: int, radius: int) -> int:
    """How many keys of `bits` bits lie within Hamming distance `radius` of one key."""
    return sum(math.comb(bits, i) for i in range(min(radius, bits) + 1))


def bucket_bits(key_bits: int, rows: int) -> int:
    """The top bits of a key that bucket a run of `rows` rows (see ROWS_PER_BUCKET)."""
    return max(0, min(key_bits, (max(rows, 1) // ROWS_PER_BUCKET).bit_length() - 1))


def pigeonhole_layout(
    max_distance: int, blocks: int, expected_articles: int, kept: int | None = None
) -> Layout:
    """The C(blocks, kept) tables keyed by every choice of `kept` blocks (default b - k)."""
    if kept is None:
        kept = blocks - max_distance
    if not 0 < kept <= blocks:
        raise ValueError(f"cannot keep {kept} of {blocks} blocks")
    radius = probe_radius(max_distance, blocks, kept)
    widths = block_widths(blocks)
    starts = [sum(widths[:i]) for i in range(blocks)]
    tables = []
    for chosen in itertools.combinations(range(blocks), kept):
        key_bits = sum(widths[i] for i in chosen)
        rest = [i for i in range(blocks) if i not in chosen]
        first = _cyclic_start(chosen, blocks)
        if first is not None:
            # Kept blocks adjacent (cyclically): a rotation brings them to the top.
            r = (FINGERPRINT_BITS - (starts[first] + key_bits)) % FINGERPRINT_BITS
            moves = [BlockMove(starts[i], widths[i], (starts[i] + r) % 64) for i in range(blocks)]
            tables.append(Table(tuple(moves), key_bits, r))
            continue
        moves, top = [], FINGERPRINT_BITS
        for i in (*chosen, *rest):
            top -= widths[i]
            moves.append(BlockMove(starts[i], widths[i], top))
        tables.append(Table(tuple(moves), key_bits, None))
    buckets = candidates = 0.0
    for t in tables:
        p = bucket_bits(t.key_bits, expected_articles)
        probes = keys_within(p, radius)
        buckets += probes
        candidates += probes * expected_articles / 2.0**p
    return Layout(max_distance, blocks, tuple(tables), candidates, kept, radius, buckets)


def _cyclic_start(kept: tuple[int, ...], blocks: int) -> int | None:
    """The first block of `kept` if its blocks are consecutive modulo `blocks`, else None."""
    chosen = set(kept)
    for a in kept:
        if all((a + j) % blocks in chosen for j in range(len(kept))):
            return a
    return None


def scan_layout(max_distance: int, expected_articles: int) -> Layout:
    return Layout(max_distance, 0, (), float(expected_articles))


def expected_runs(expected_articles: int) -> float:
    """Roughly how many runs a table has: batches of ~1000 rows merged at ratio 2 leave about
    log2(n / 10,000) of them (fewer after a reopen, which loads everything as one run)."""
    return max(1.0, math.log2(max(expected_articles, 1) / 10_000))


def layout_cost(layout: Layout, expected_articles: int) -> float:
    """Estimated microseconds per query, memory included at MEMORY_US_PER_BYTE."""
    if not layout.blocks:
        return expected_articles * SCAN_US
    return (
        len(layout.tables) * PROBE_US
        + layout.expected_buckets * expected_runs(expected_articles) * BUCKET_US
        + layout.expected_candidates * CANDIDATE_US
        + layout.table_bytes_per_article * MEMORY_US_PER_BYTE
    )


def choose_layout(
    max_distance: int,
    expected_articles: int,
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES,
) -> Layout:
    """Pick the number of blocks b (or a plain scan) for distance k and n live articles.

    Pigeonhole (Manku, Jain, Das Sarma, WWW 2007): split the 64 bits into b > k blocks. Two
    fingerprints at Hamming distance <= k differ in at most k blocks, so they agree exactly on
    at least b - k of them. One table per choice of b - k kept blocks (C(b, k) tables), keyed by
    those blocks, therefore holds every true neighbour under the query's own key in at least
    one table: probing all tables and verifying each candidate's full distance is exact for
    any k. Nothing beyond k is returned because every candidate is verified.

    The trade-off: a key of m bits leaves about n / 2**m candidates per table, so more blocks
    mean longer keys and fewer candidates, but C(b, k) tables to probe and to hold in memory.
    For k = 3 at 10 M: b = 4 gives 4 tables of 16-bit keys (~610 candidates, 36 B/article);
    b = 5 gives 10 tables of >=25-bit keys (~3 candidates but 84 B/article). For k = 6,
    b = 8 gives 28 tables of 16-bit keys (228 B/article: k = 6 at 10 M needs ~2.5 GB). Since
    the probe kernel verifies a candidate in about half a nanosecond, fewer tables with more
    candidates win: k = 6 at 10 M takes 4 tables probed within radius 1 (~10,400 candidates,
    40 B/article), k = 12 at 1 M 5 tables within radius 2 (~64,000). For small n no table
    beats comparing against every row, which the kernel does at about 0.3 ns a row.

    Large k: C(b, k) tables become too many, so a table may keep fewer blocks than b - k and be
    probed with every key within a radius of the query's key (`probe_radius`: the most bits
    the closest `kept` blocks of a neighbour within k can differ in). With kept = 1 this is
    multi-index hashing (Norouzi, Punjani, Fleet, CVPR 2012): for k = 10, 4 tables of 16-bit
    blocks probed within radius 2 (137 keys each) instead of a scan of every row.
    Runs are bucketed by a key prefix, so a probe is a lookup, not a binary search.

    We take the candidate with the least `layout_cost`: table probes, bucket lookups,
    candidate checks and table memory priced in microseconds per query (constants above),
    among those of at most `max_table_bytes` of tables per article. The cap is what fits: k =
    12 at 100 M takes 21 tables by the cost (~193 B an article, ~21 GB with the rows' own
    16 B); at 128 B it takes 4, with 3.5 times as many candidates per query. Below one table's
    bytes (13) only the plain scan is left.
    """
    if not 0 <= max_distance < FINGERPRINT_BITS:
        raise ValueError(f"max_distance must be in 0..63, got {max_distance}")
    n = max(int(expected_articles), 1)
    best = scan_layout(max_distance, n)
    best_cost = layout_cost(best, n)
    for blocks in range(1, min(max_distance + 6, FINGERPRINT_BITS) + 1):
        for kept in range(1, blocks + 1):
            tables = math.comb(blocks, kept)
            # Both limits before building the candidate: building is most of the choice's
            # cost (0.06 s at 20,000 articles, paid at every start).
            if tables > MAX_TABLES or table_bytes_per_article(tables) > max_table_bytes:
                continue
            widest = -(-FINGERPRINT_BITS // blocks) * kept
            radius = probe_radius(max_distance, blocks, kept)
            if keys_within(min(widest, bucket_bits(widest, n)), radius) > MAX_BUCKETS_PER_PROBE:
                continue
            candidate = pigeonhole_layout(max_distance, blocks, n, kept)
            cost = layout_cost(candidate, n)
            if cost < best_cost:
                best, best_cost = candidate, cost
    return best


def _estimate(value: float) -> str:
    """An estimate as a person reads one: 64,209, 12, 0.31 (not 64209.0)."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"
