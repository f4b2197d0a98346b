"""`newsdedup bench index`: load N fingerprints over the window, then time check+insert.

Planted near-duplicates at every distance 0..k+2 and a brute-force check of a sample of
queries make sure the speed is not bought with missed or extra matches.
"""

from __future__ import annotations

import argparse
import bisect
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from consumer.errors import InputError
from consumer.ops.progress import Progress
from indexstore import ArticleRecord, IndexOptions, IndexStore, SearchResult
from indexstore.snapshot import FILE_NAME as SNAPSHOT_FILE

HOUR_MS = 3_600_000
START_MS = 1_800_000_000_000  # an arbitrary fixed epoch, 2027
CONTENT = b"\0" * 16
BRUTE_FORCE_CHUNK = 1 << 22  # fingerprints XORed at once by the brute force (32 MiB)


@dataclass(frozen=True, slots=True)
class IndexBenchResult:
    n: int
    k: int
    layout: str
    hours: int  # event time the loaded articles span (72 = the window)
    load_seconds: float
    load_per_second: float
    load_ms_per_segment: float  # load time per 1 h segment of event time
    ops: int
    batch: int
    ops_per_second: float  # check + insert, commits included, wall clock
    ops_per_cpu_second: float  # the same per CPU second of this process (less load-sensitive)
    check_p50_ms: float  # one search() plus its share of the batch's prefetch
    check_p99_ms: float
    commit_p50_ms: float
    commit_p99_ms: float
    planted: int
    planted_found: int  # planted at distance <= k and found
    verified: int
    mismatches: int  # sampled queries whose matches differ from brute force
    disk_bytes: int
    bytes_per_article: float  # the whole directory over the live articles
    # Of which, measured after the reopen (which flushes the logs into SST files), per article:
    disk_rows_per_article: float  # search side in RocksDB: fingerprint blobs and row ids
    disk_tables_per_article: float  # search side: the search tables saved at close
    disk_records_per_article: float  # the article records
    peak_rss_mib: float  # whole process, including the benchmark's own arrays
    bench_arrays_mib: float  # of which: the fingerprints kept for the brute-force check
    search_tables_mib: float  # of which: the index's in-memory search tables at the end
    # Reopen and drop run in a new process, as after a restart (the files are in page cache).
    reopen_seconds: float
    reopen_peak_rss_mib: float  # that process, once open
    drop_seconds: float
    drop_segment_articles: int


def register(bench_subparsers: argparse._SubParsersAction) -> None:
    p = bench_subparsers.add_parser(
        "index", help="index throughput, latency, size, reopen and expiry at N articles"
    )
    p.add_argument("--n", type=int, default=1_000_000, help="articles loaded (default 1M)")
    p.add_argument("--k", type=int, default=3, help="max Hamming distance, 0..16 (default 3)")
    p.add_argument(
        "--ops", type=int, default=100_000, help="check+insert measured (default %(default)s)"
    )
    p.add_argument("--batch", type=int, default=1000, help="articles per batch (default 1000)")
    p.add_argument(
        "--verify",
        type=int,
        default=300,
        help="queries checked by brute force (default %(default)s)",
    )
    p.add_argument("--dir", help="index directory (default: a temporary one, removed after)")
    p.add_argument(
        "--hours",
        type=int,
        default=72,
        help="event time the loaded articles span (default 72 = the window); longer spans "
        "replay history: segments are created and expired after every batch, as in a replay",
    )
    p.add_argument(
        "--max-table-bytes",
        type=int,
        default=IndexOptions().max_table_bytes,
        help="search-table memory per article the layout may take, as [index] max_table_bytes "
        "(default %(default)s)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def _record(i: int, simhash: int, t: int) -> ArticleRecord:
    article_id = f"a{i}"
    return ArticleRecord(article_id, simhash, CONTENT, t)


def run(args: argparse.Namespace) -> int:
    if args.n < 1 or args.ops < 1 or args.batch < 1 or not 0 <= args.k <= 16 or args.hours < 1:
        raise InputError("need --n, --ops, --batch, --hours >= 1 and 0 <= --k <= 16")
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-index-"))
    try:
        result = _bench(args, workdir)
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        for name, value in asdict(result).items():
            shown = f"{value:,.3f}" if isinstance(value, float) else value
            print(f"{name:>22}: {shown}")
    return 0


@dataclass(slots=True)
class _Plan:
    """What one run loads and queries: the fingerprints, their event times, the planted
    near-duplicates and the queries checked by brute force."""

    n: int
    k: int
    ops: int
    batch: int
    retention: int
    options: IndexOptions
    clock_ms: int
    fps: np.ndarray
    times: _EventTimes
    planted_source: dict[int, int]
    planted_distance: dict[int, int]
    verify_rows: set[int]


@dataclass(slots=True)
class _Measured:
    """What the timed check+insert loop saw."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0
    check_ms: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)
    found_planted: int = 0
    to_verify: list[tuple[int, SearchResult]] = field(default_factory=list)


def _plan(args: argparse.Namespace) -> _Plan:
    rng = np.random.default_rng(args.seed)
    n, k, ops = args.n, args.k, args.ops
    retention = 72 * HOUR_MS
    span = args.hours * HOUR_MS
    live = n * retention // max(span, retention)  # articles in the window at the end
    options = IndexOptions(
        max_distance=k,
        retention_ms=retention,
        expected_articles=live,
        max_table_bytes=args.max_table_bytes,
    )
    total = n + ops
    fps = rng.integers(0, 2**64, size=total, dtype=np.uint64)
    # Planted near-duplicates: a third of the measured queries copy a loaded fingerprint with
    # d random bits flipped, d cycling through 0..k+2 (so some lie just beyond k).
    planted = np.arange(n, total)[rng.random(ops) < 1 / 3]
    distances = np.arange(len(planted)) % (k + 3)
    sources = rng.integers(max(0, n - live // 2), n, size=len(planted))
    for row, src, d in zip(planted.tolist(), sources.tolist(), distances.tolist(), strict=True):
        bits = rng.choice(64, size=d, replace=False)
        mask = sum(1 << int(b) for b in bits)
        fps[row] = np.uint64(int(fps[src]) ^ mask)
    sample = rng.choice(np.arange(n, total), size=min(args.verify, ops), replace=False)
    return _Plan(
        n=n,
        k=k,
        ops=ops,
        batch=args.batch,
        retention=retention,
        options=options,
        clock_ms=START_MS + span + HOUR_MS,
        fps=fps,
        # Loaded articles spread evenly over the window, in event-time order like a real
        # feed; the measured ones continue after them. Computed where needed rather than
        # kept: an array of them would count against the index's memory.
        times=_EventTimes(n, span),
        planted_source=dict(zip(planted.tolist(), sources.tolist(), strict=True)),
        planted_distance=dict(zip(planted.tolist(), distances.tolist(), strict=True)),
        verify_rows=set(sample.tolist()),
    )


def _load(store: IndexStore, plan: _Plan, replay: bool) -> float:
    """Put the first n articles in batches of 10,000; the seconds it took."""
    n, fps, times = plan.n, plan.fps, plan.times
    started = time.perf_counter()
    with Progress("load", total=n, unit="articles") as progress:
        for lo in range(0, n, 10_000):
            hi = min(n, lo + 10_000)
            # Python ints only per batch: lists of all N would dwarf the index in RSS.
            fp_list, time_list = fps[lo:hi].tolist(), times.between(lo, hi)
            batch = store.begin()
            # As the service does: one multi-get for the batch's ids, not one get per put.
            batch.prefetch_records([f"a{i}" for i in range(lo, hi)])
            for i in range(lo, hi):
                batch.put(_record(i, fp_list[i - lo], time_list[i - lo]))
            batch.commit()
            if replay:
                store.expire()
            progress.advance(hi - lo)
        # Bulk commits leave up to 4 M rows for the first search to sort (as after a restore):
        # a one-off cost of loading, not of the check+insert measured next.
        store.prepare_search()
    return time.perf_counter() - started


def _measure(store: IndexStore, plan: _Plan) -> _Measured:
    """Check+insert the measured articles in batches, as the service does, timed."""
    m = _Measured()
    n, total, fps, times = plan.n, plan.n + plan.ops, plan.fps, plan.times
    started = time.perf_counter()
    cpu_started = time.process_time()
    with Progress("check+insert", total=plan.ops, unit="articles") as progress:
        for lo in range(n, total, plan.batch):
            hi = min(total, lo + plan.batch)
            fp_list, time_list = fps[lo:hi].tolist(), times.between(lo, hi)
            batch = store.begin()
            t0 = time.perf_counter()
            batch.prefetch([(fp_list[i - lo], CONTENT, time_list[i - lo]) for i in range(lo, hi)])
            batch.prefetch_records([f"a{i}" for i in range(lo, hi)])
            share = (time.perf_counter() - t0) / (hi - lo)
            for i in range(lo, hi):
                t1 = time.perf_counter()
                known = batch.lookup(f"a{i}")
                result = batch.search(fp_list[i - lo], CONTENT, time_list[i - lo], limit=1000)
                m.check_ms.append((time.perf_counter() - t1 + share) * 1000)
                if known is None:
                    batch.put(_record(i, fp_list[i - lo], result.event_time_ms))
                _note(m, plan, i, result)
            t2 = time.perf_counter()
            batch.commit()
            m.commit_ms.append((time.perf_counter() - t2) * 1000)
            progress.advance(hi - lo)
    m.seconds = time.perf_counter() - started
    m.cpu_seconds = time.process_time() - cpu_started
    return m


def _note(m: _Measured, plan: _Plan, i: int, result: SearchResult) -> None:
    if i in plan.planted_source and plan.planted_distance[i] <= plan.k:
        want = f"a{plan.planted_source[i]}"
        m.found_planted += any(r.article_id == want for r in result.matches)
    if i in plan.verify_rows:
        m.to_verify.append((i, result))


def _bench(args: argparse.Namespace, workdir: Path) -> IndexBenchResult:
    plan = _plan(args)
    n, ops = plan.n, plan.ops
    indexed = _load_and_measure(plan, workdir, replay=args.hours * HOUR_MS > plan.retention)
    load_seconds, m, layout, articles, tables_bytes = indexed
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # Brute force after the clock stops: it scans every article once per sampled query.
    mismatches = sum(
        _differs(r, plan.fps, plan.times, i, plan.k, plan.retention) for i, r in m.to_verify
    )
    disk = sum(f.stat().st_size for f in workdir.iterdir() if f.is_file())
    snapshot_path = workdir / SNAPSHOT_FILE
    snapshot_bytes = snapshot_path.stat().st_size if snapshot_path.exists() else 0
    reopened = _reopen_in_new_process(workdir, plan.options, plan.clock_ms)
    per = max(articles, 1)
    return IndexBenchResult(
        n=n,
        k=plan.k,
        layout=layout,
        hours=args.hours,
        load_seconds=load_seconds,
        load_per_second=n / load_seconds,
        load_ms_per_segment=load_seconds * 1000 / args.hours,
        ops=ops,
        batch=plan.batch,
        ops_per_second=ops / m.seconds,
        ops_per_cpu_second=ops / m.cpu_seconds,
        check_p50_ms=float(np.percentile(m.check_ms, 50)),
        check_p99_ms=float(np.percentile(m.check_ms, 99)),
        commit_p50_ms=float(np.percentile(m.commit_ms, 50)),
        commit_p99_ms=float(np.percentile(m.commit_ms, 99)),
        planted=sum(1 for d in plan.planted_distance.values() if d <= plan.k),
        planted_found=m.found_planted,
        verified=len(plan.verify_rows),
        mismatches=mismatches,
        disk_bytes=disk,
        bytes_per_article=disk / per,
        disk_rows_per_article=reopened["rows_bytes"] / per,
        disk_tables_per_article=snapshot_bytes / per,
        disk_records_per_article=reopened["records_bytes"] / per,
        peak_rss_mib=rss_mib,
        bench_arrays_mib=plan.fps.nbytes / 2**20,
        search_tables_mib=tables_bytes / 2**20,
        reopen_seconds=reopened["reopen_seconds"],
        reopen_peak_rss_mib=reopened["peak_rss_mib"],
        drop_seconds=reopened["drop_seconds"],
        drop_segment_articles=reopened["drop_segment_articles"],
    )


def _load_and_measure(
    plan: _Plan, workdir: Path, replay: bool
) -> tuple[float, _Measured, str, int, int]:
    """Open, load, measure and close the index; the store is gone when this returns, so
    its memory is not held while the reopen runs in another process."""
    clock_ms = plan.clock_ms
    store = IndexStore.open(workdir, plan.options, clock=lambda: clock_ms)
    try:
        load_seconds = _load(store, plan, replay)
        m = _measure(store, plan)
        layout = store.layout.describe()
        articles = store.stats().articles
        tables_bytes = store.memory_usage()["search_tables"]
    finally:
        store.close()
    return load_seconds, m, layout, articles, tables_bytes


class _EventTimes:
    """Event time of article i: the first n spread evenly over `span`, the rest after them."""

    def __init__(self, n: int, span: int) -> None:
        self.n, self.span = n, span

    def __getitem__(self, i: int) -> int:
        return START_MS + i * self.span // self.n

    def between(self, lo: int, hi: int) -> list[int]:
        return (START_MS + (np.arange(lo, hi, dtype=np.int64) * self.span) // self.n).tolist()

    def first_at_or_after(self, t: int, hi: int) -> int:
        """The first article below `hi` with event time >= t (times never decrease)."""
        return bisect.bisect_left(range(hi), t, key=self.__getitem__)


def _reopen_in_new_process(workdir: Path, options: IndexOptions, clock_ms: int) -> dict:
    code = "from consumer.bench.index import reopen_and_drop; reopen_and_drop()"
    args = [str(workdir), str(options.max_distance), str(options.retention_ms)]
    args += [str(options.expected_articles), str(options.max_table_bytes), str(clock_ms)]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"reopening the index failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def _high_water_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reopen_and_drop() -> None:
    """In a new process: open the index the benchmark left, then drop its oldest segment."""
    workdir, k, retention, live, cap, clock_ms = sys.argv[1], *map(int, sys.argv[2:7])
    options = IndexOptions(
        max_distance=k, retention_ms=retention, expected_articles=live, max_table_bytes=cap
    )
    started = time.perf_counter()
    store = IndexStore.open(Path(workdir), options, clock=lambda: clock_ms)
    reopen_seconds = time.perf_counter() - started
    # Not ru_maxrss: Linux carries the parent's resident size at fork through exec into it.
    rss_mib = _high_water_mib()
    disk = store.disk_usage()
    oldest = store.stats().segments[0]
    started = time.perf_counter()
    store.expire(oldest.end_ms)
    drop_seconds = time.perf_counter() - started
    store.close()
    result = {"reopen_seconds": reopen_seconds, "peak_rss_mib": rss_mib}
    result |= {"drop_seconds": drop_seconds, "drop_segment_articles": oldest.articles}
    result |= {"rows_bytes": disk["rows"], "records_bytes": disk["records"]}
    print(json.dumps(result))


def _differs(
    result: SearchResult, fps: np.ndarray, times: _EventTimes, i: int, k: int, retention: int
) -> bool:
    """Brute force over every article inserted before article i (in event-time order, so
    the window is a suffix of them), a chunk at a time: at 100 M one XOR of the whole window
    would hold 800 MB more."""
    first = times.first_at_or_after(times[i - 1] - retention, i) if i else 0
    want: set[str] = set()
    for lo in range(first, i, BRUTE_FORCE_CHUNK):
        d = np.bitwise_count(fps[lo : min(i, lo + BRUTE_FORCE_CHUNK)] ^ fps[i])
        want.update(f"a{lo + j}" for j in np.flatnonzero(d <= k).tolist())
    return want != {m.article_id for m in result.matches}
