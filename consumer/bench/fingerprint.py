"""`newsdedup bench fingerprint`: the reference (jieba) and fast (rjieba) engines side by side,
one thread, same articles, plus how often their fingerprints are identical."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.errors import InputError, NewsdedupError
from consumer.fingerprint import Fingerprint, Fingerprinter, FingerprintOptions, hamming
from consumer.normalize import Normalizer
from consumer.terms import load_segmenter

ENGINE_ORDER = ("jieba", "rjieba")


@dataclass(frozen=True, slots=True)
class EngineResult:
    engine: str
    articles: int
    setup_seconds: float  # building the Fingerprinter (IDF table, segmenter) in this process
    seconds: float  # wall time for all articles
    cpu_seconds: float  # this process's CPU time: less sensitive to a busy machine
    docs_per_second: float
    mb_per_second: float  # UTF-8 megabytes of title + content per wall second
    docs_per_cpu_second: float
    errors: int  # articles with nothing to fingerprint


def register(bench_subparsers: argparse._SubParsersAction) -> None:
    p = bench_subparsers.add_parser(
        "fingerprint",
        help="fingerprinting throughput: jieba vs rjieba, and their agreement",
    )
    p.add_argument(
        "--data",
        default=str(shared_data_dir() / "zh_hkcnews_2017_2022.jsonl.gz"),
        help="JSONL corpus (default: the hkcnews corpus in ../shared/data)",
    )
    p.add_argument("--limit", type=int, default=3000, help="articles to use (default 3000)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def _load(path: str, limit: int) -> list[tuple[str, str]]:
    articles = []
    for record in iter_jsonl(path, limit):
        title, content = record.get("title") or "", record.get("content") or ""
        if isinstance(title, str) and isinstance(content, str):
            articles.append((title, content))
    if not articles:
        raise InputError(f"{path}: no articles with text")
    return articles


def _run_engine(
    engine: str, articles: list[tuple[str, str]], megabytes: float
) -> tuple[EngineResult, list[Fingerprint | None]]:
    t0 = time.perf_counter()
    fingerprinter = Fingerprinter(FingerprintOptions(engine=engine))
    setup = time.perf_counter() - t0
    fingerprints: list[Fingerprint | None] = []
    errors = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for title, content in articles:
        try:
            fingerprints.append(fingerprinter.fingerprint(title, content))
        except NewsdedupError:
            fingerprints.append(None)
            errors += 1
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    n = len(articles)
    result = EngineResult(
        engine, n, setup, wall, cpu, n / wall, megabytes / wall, n / max(cpu, 1e-9), errors
    )
    return result, fingerprints


def _segmenter_floor(articles: list[tuple[str, str]]) -> float:
    """Articles per CPU second of rjieba's cut alone on normalized text: the physical floor."""
    normalize = Normalizer()
    texts = [normalize(f"{title}\n{content}") for title, content in articles]
    cut = load_segmenter("rjieba")
    cpu0 = time.process_time()
    for text in texts:
        cut(text)
    return len(texts) / max(time.process_time() - cpu0, 1e-9)


def run(args: argparse.Namespace) -> int:
    articles = _load(args.data, args.limit)
    megabytes = sum(len(t.encode()) + len(c.encode()) for t, c in articles) / 1e6
    results: dict[str, EngineResult] = {}
    fingerprints: dict[str, list[Fingerprint | None]] = {}
    for engine in ENGINE_ORDER:
        results[engine], fingerprints[engine] = _run_engine(engine, articles, megabytes)
    pairs = list(zip(fingerprints["jieba"], fingerprints["rjieba"], strict=True))
    identical = sum(a == b for a, b in pairs)
    distances = [hamming(a.simhash, b.simhash) for a, b in pairs if a and b and a != b]
    floor = _segmenter_floor(articles)
    report = {
        "data": args.data,
        "articles": len(articles),
        "avg_chars": sum(len(t) + len(c) for t, c in articles) / len(articles),
        "engines": {name: asdict(r) for name, r in results.items()},
        "speedup": results["rjieba"].docs_per_cpu_second / results["jieba"].docs_per_cpu_second,
        "identical_share": identical / len(pairs),
        "differing": len(pairs) - identical,
        "max_distance_when_differing": max(distances, default=0),
        "rjieba_cut_only_docs_per_cpu_second": floor,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.data}: {len(articles):,} articles, {report['avg_chars']:,.0f} chars on average")
    print(f"{'engine':8} {'docs/s':>8} {'MB/s':>6} {'docs/CPU-s':>11} {'setup s':>8} {'errors':>6}")
    for r in results.values():
        print(
            f"{r.engine:8} {r.docs_per_second:8,.0f} {r.mb_per_second:6.2f} "
            f"{r.docs_per_cpu_second:11,.0f} {r.setup_seconds:8.2f} {r.errors:6}"
        )
    print(f"rjieba.cut alone on normalized text: {floor:,.0f} docs/CPU-s (the floor)")
    print(
        f"identical fingerprints: {report['identical_share']:.4%} "
        f"({report['differing']} differ, max distance {report['max_distance_when_differing']})"
    )
    return 0
