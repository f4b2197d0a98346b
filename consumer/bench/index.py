"""`newsdedup bench index`: load N fingerprints over the window, then time check+insert.

Planted near-duplicates at every distance 0..k+2 and a brute-force check of a sample of
queries make sure the speed is not bought with missed or extra matches.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from consumer.errors import InputError
from consumer.progress import Progress
from indexstore import ArticleRecord, IndexOptions, IndexStore, SearchResult

HOUR_MS = 3_600_000
START_MS = 1_800_000_000_000  # an arbitrary fixed epoch, 2027
CONTENT = b"\0" * 16


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
    bytes_per_article: float
    peak_rss_mib: float  # whole process, including the benchmark's own arrays
    bench_arrays_mib: float  # of which: the fingerprints kept for the brute-force check
    reopen_seconds: float
    drop_seconds: float
    drop_segment_articles: int


def register(bench_subparsers: argparse._SubParsersAction) -> None:
    p = bench_subparsers.add_parser(
        "index", help="index throughput, latency, size, reopen and expiry at N articles"
    )
    p.add_argument("--n", type=int, default=1_000_000, help="articles loaded (default 1M)")
    p.add_argument("--k", type=int, default=3, help="max Hamming distance (default 3)")
    p.add_argument("--ops", type=int, default=100_000, help="check+insert measured")
    p.add_argument("--batch", type=int, default=1000, help="articles per batch (default 1000)")
    p.add_argument("--verify", type=int, default=300, help="queries checked by brute force")
    p.add_argument("--dir", help="index directory (default: a temporary one, removed after)")
    p.add_argument(
        "--hours",
        type=int,
        default=72,
        help="event time the loaded articles span (default 72 = the window); longer spans "
        "replay history: segments are created and expired after every batch, as in a replay",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def _record(i: int, simhash: int, t: int) -> ArticleRecord:
    article_id = f"a{i}"
    return ArticleRecord(article_id, simhash, CONTENT, t, article_id, "unique", None, None, False)


def run(args: argparse.Namespace) -> int:
    if args.n < 1 or args.ops < 1 or args.batch < 1 or not 0 <= args.k <= 10 or args.hours < 1:
        raise InputError("need --n, --ops, --batch, --hours >= 1 and 0 <= --k <= 10")
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


def _bench(args: argparse.Namespace, workdir: Path) -> IndexBenchResult:
    rng = np.random.default_rng(args.seed)
    n, k, ops, bsize = args.n, args.k, args.ops, args.batch
    retention = 72 * HOUR_MS
    span = args.hours * HOUR_MS
    live = n * retention // max(span, retention)  # articles in the window at the end
    options = IndexOptions(max_distance=k, retention_ms=retention, expected_articles=live)
    clock_ms = START_MS + span + HOUR_MS
    total = n + ops
    fps = rng.integers(0, 2**64, size=total, dtype=np.uint64)
    # Loaded articles spread evenly over the window, in event-time order like a real feed;
    # the measured ones continue after them.
    times = START_MS + (np.arange(total, dtype=np.int64) * span) // n

    # Planted near-duplicates: a third of the measured queries copy a loaded fingerprint with
    # d random bits flipped, d cycling through 0..k+2 (so some lie just beyond k).
    planted = np.arange(n, total)[rng.random(ops) < 1 / 3]
    distances = np.arange(len(planted)) % (k + 3)
    sources = rng.integers(max(0, n - live // 2), n, size=len(planted))
    for row, src, d in zip(planted.tolist(), sources.tolist(), distances.tolist(), strict=True):
        bits = rng.choice(64, size=d, replace=False)
        mask = sum(1 << int(b) for b in bits)
        fps[row] = np.uint64(int(fps[src]) ^ mask)
    planted_source = dict(zip(planted.tolist(), sources.tolist(), strict=True))
    planted_distance = dict(zip(planted.tolist(), distances.tolist(), strict=True))

    store = IndexStore.open(workdir, options, clock=lambda: clock_ms)
    started = time.perf_counter()
    with Progress("load", total=n, unit="articles") as progress:
        for lo in range(0, n, 10_000):
            hi = min(n, lo + 10_000)
            # Python ints only per batch: lists of all N would dwarf the index in RSS.
            fp_list, time_list = fps[lo:hi].tolist(), times[lo:hi].tolist()
            batch = store.begin()
            # As the service does: one multi-get for the batch's ids, not one get per put.
            batch.prefetch_records([f"a{i}" for i in range(lo, hi)])
            for i in range(lo, hi):
                batch.put(_record(i, fp_list[i - lo], time_list[i - lo]))
            batch.commit()
            if span > retention:
                store.expire()
            progress.advance(min(n, lo + 10_000) - lo)
    load_seconds = time.perf_counter() - started

    check_ms: list[float] = []
    commit_ms: list[float] = []
    found_planted = 0
    sample = rng.choice(np.arange(n, total), size=min(args.verify, ops), replace=False)
    verify_rows = set(sample.tolist())
    to_verify: list[tuple[int, SearchResult]] = []
    started = time.perf_counter()
    cpu_started = time.process_time()
    with Progress("check+insert", total=ops, unit="articles") as progress:
        for lo in range(n, total, bsize):
            hi = min(total, lo + bsize)
            fp_list, time_list = fps[lo:hi].tolist(), times[lo:hi].tolist()
            batch = store.begin()
            t0 = time.perf_counter()
            batch.prefetch([(fp_list[i - lo], CONTENT, time_list[i - lo]) for i in range(lo, hi)])
            batch.prefetch_records([f"a{i}" for i in range(lo, hi)])
            share = (time.perf_counter() - t0) / (hi - lo)
            for i in range(lo, hi):
                t1 = time.perf_counter()
                article_id = f"a{i}"
                known = batch.lookup(article_id)
                result = batch.search(fp_list[i - lo], CONTENT, time_list[i - lo], limit=1000)
                check_ms.append((time.perf_counter() - t1 + share) * 1000)
                if known is None:
                    batch.put(_record(i, fp_list[i - lo], result.event_time_ms))
                if i in planted_source and planted_distance[i] <= k:
                    want = f"a{planted_source[i]}"
                    found_planted += any(m.article_id == want for m in result.matches)
                if i in verify_rows:
                    to_verify.append((i, result))
            t2 = time.perf_counter()
            batch.commit()
            commit_ms.append((time.perf_counter() - t2) * 1000)
            progress.advance(hi - lo)
    measure_seconds = time.perf_counter() - started
    measure_cpu = time.process_time() - cpu_started
    # Brute force after the clock stops: it scans every article once per sampled query.
    mismatches = sum(_differs(r, fps, times, i, k, retention) for i, r in to_verify)
    layout = store.layout.describe()
    articles = store.stats().articles
    store.close()
    disk = sum(f.stat().st_size for f in workdir.iterdir() if f.is_file())
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    started = time.perf_counter()
    store = IndexStore.open(workdir, options, clock=lambda: clock_ms)
    reopen_seconds = time.perf_counter() - started
    oldest = store.stats().segments[0]
    started = time.perf_counter()
    store.expire(oldest.end_ms)
    drop_seconds = time.perf_counter() - started
    store.close()
    return IndexBenchResult(
        n=n,
        k=k,
        layout=layout,
        hours=args.hours,
        load_seconds=load_seconds,
        load_per_second=n / load_seconds,
        load_ms_per_segment=load_seconds * 1000 / args.hours,
        ops=ops,
        batch=bsize,
        ops_per_second=ops / measure_seconds,
        ops_per_cpu_second=ops / measure_cpu,
        check_p50_ms=float(np.percentile(check_ms, 50)),
        check_p99_ms=float(np.percentile(check_ms, 99)),
        commit_p50_ms=float(np.percentile(commit_ms, 50)),
        commit_p99_ms=float(np.percentile(commit_ms, 99)),
        planted=int(sum(1 for d in planted_distance.values() if d <= k)),
        planted_found=found_planted,
        verified=len(verify_rows),
        mismatches=mismatches,
        disk_bytes=disk,
        bytes_per_article=disk / max(articles, 1),
        peak_rss_mib=rss_mib,
        bench_arrays_mib=(fps.nbytes + times.nbytes) / 2**20,
        reopen_seconds=reopen_seconds,
        drop_seconds=drop_seconds,
        drop_segment_articles=oldest.articles,
    )


def _differs(
    result: SearchResult, fps: np.ndarray, times: np.ndarray, i: int, k: int, retention: int
) -> bool:
    """Brute force over every article inserted before article i."""
    d = np.bitwise_count(fps[:i] ^ fps[i])
    watermark = int(times[:i].max()) if i else None
    close = d <= k
    if watermark is not None:
        close &= times[:i] >= watermark - retention
    want = {f"a{j}" for j in np.flatnonzero(close).tolist()}
    return want != {m.article_id for m in result.matches}
