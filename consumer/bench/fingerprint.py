"""`newsdedup bench fingerprint`: the reference (jieba) and fast (rjieba) engines side by side,
one thread, same articles; the fast engine in its pure-Python form and with the native kernel,
article by article and in batches; how often each gives the reference's fingerprints; and the
floors beside them: the segmenter alone, normalization alone and its OpenCC conversion alone."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass

import opencc

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.errors import InputError, NewsdedupError
from consumer.fingerprint.fingerprinter import (
    BATCH,
    Fingerprint,
    Fingerprinter,
    FingerprintOptions,
    hamming,
)
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.terms import load_segmenter
from consumer.ops.progress import Progress


@dataclass(frozen=True, slots=True)
class EngineResult:
    engine: str
    kernel: str  # "native" (consumer/native/) or "python" (the reference code)
    path: str  # "per-article" (`fingerprint`) or "batch" (`fingerprint_many`)
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
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds of the fast engine's variants, alternating; the fastest round counts "
        "(default 3: a busy machine slows single rounds)",
    )
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


def _run(
    fingerprinter: Fingerprinter, articles: list[tuple[str, str]], batch: bool
) -> tuple[float, float, list[Fingerprint | None]]:
    """Wall seconds, CPU seconds and the fingerprints (None: nothing to fingerprint)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if batch:
        results = fingerprinter.fingerprint_many(articles)
    else:
        results = []
        for title, content in articles:
            try:
                results.append(fingerprinter.fingerprint(title, content))
            except NewsdedupError as e:
                results.append(e)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return wall, cpu, [r if isinstance(r, Fingerprint) else None for r in results]


def _result(
    engine: str,
    kernel: str,
    path: str,
    articles: int,
    megabytes: float,
    setup: float,
    wall: float,
    cpu: float,
    fingerprints: list[Fingerprint | None],
) -> EngineResult:
    return EngineResult(
        engine,
        kernel,
        path,
        articles,
        setup,
        wall,
        cpu,
        articles / wall,
        megabytes / wall,
        articles / max(cpu, 1e-9),
        fingerprints.count(None),
    )


def _build(engine: str, native: bool = True) -> tuple[Fingerprinter, float]:
    t0 = time.perf_counter()
    fingerprinter = Fingerprinter(FingerprintOptions(engine=engine), native=native)
    return fingerprinter, time.perf_counter() - t0


def _segmenter_floor(articles: list[tuple[str, str]]) -> float:
    """Articles per CPU second of rjieba's cut alone on normalized text: the segmenter's floor."""
    normalize = Normalizer()
    texts = [normalize(f"{title}\n{content}") for title, content in articles]
    cut = load_segmenter("rjieba")
    cpu0 = time.process_time()
    for text in texts:
        cut(text)
    return len(texts) / max(time.process_time() - cpu0, 1e-9)


def _normalization_floor(articles: list[tuple[str, str]]) -> tuple[float, float]:
    """Articles per CPU second of normalization alone (batches as `fingerprint_many`), and of
    its OpenCC t2s calls alone: what the native kernel cannot speed up."""
    normalize = Normalizer()
    texts = [text for article in articles for text in article]
    cpu0 = time.process_time()
    for start in range(0, len(texts), 2 * BATCH):
        normalize.many(texts[start : start + 2 * BATCH])
    normalization = time.process_time() - cpu0
    # The converter's input as `Normalizer.many` hands it over: the texts prepared for it (all
    # but the conversion), those that are not ASCII, joined into one string per batch.
    prepare = Normalizer(convert_traditional=False)
    batches = [
        "\n".join(
            text for text in prepare.many(texts[start : start + 2 * BATCH]) if not text.isascii()
        )
        for start in range(0, len(texts), 2 * BATCH)
    ]
    convert = opencc.OpenCC("t2s").convert
    cpu0 = time.process_time()
    for batch in batches:
        convert(batch)
    t2s = time.process_time() - cpu0
    return len(articles) / max(normalization, 1e-9), len(articles) / max(t2s, 1e-9)


def run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise InputError("--repeat must be 1 or more")
    articles = _load(args.data, args.limit)
    n = len(articles)
    megabytes = sum(len(t.encode()) + len(c.encode()) for t, c in articles) / 1e6

    # The fast engine's variants: (kernel, path). The first is the code before the native
    # kernel, kept as its reference.
    variants = [("python", "batch"), ("native", "per-article"), ("native", "batch")]
    # Progress counts whole timed runs, so it adds nothing inside the measured loops.
    progress = Progress("bench fingerprint", total=1 + len(variants) * args.repeat, unit="runs")
    reference, setup = _build("jieba")
    wall, cpu, expected = _run(reference, articles, batch=False)
    progress.advance()
    jieba = _result("jieba", "python", "per-article", n, megabytes, setup, wall, cpu, expected)
    best, setups = _fastest_of_rounds(articles, variants, args.repeat, progress)
    fast = {
        variant: _result(
            "rjieba",
            *variant,
            n,
            megabytes,
            setups[variant[0]],
            *measured,
        )
        for variant, measured in best.items()
    }
    report = _report(args, articles, expected, jieba, fast, best)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report, jieba, fast, args.repeat)
    return 0


_Measured = tuple[float, float, list[Fingerprint | None]]  # wall s, CPU s, fingerprints


def _fastest_of_rounds(
    articles: list[tuple[str, str]],
    variants: list[tuple[str, str]],
    repeat: int,
    progress: Progress,
) -> tuple[dict[tuple[str, str], _Measured], dict[str, float]]:
    """Each rjieba variant's fastest run (least CPU) of `repeat`, and each kernel's setup
    seconds. The variants alternate, so that all see the same machine load."""
    python_fast, python_setup = _build("rjieba", native=False)
    native_fast, native_setup = _build("rjieba")
    best: dict[tuple[str, str], _Measured] = {}
    with progress:
        for _ in range(repeat):
            for kernel, path in variants:
                fingerprinter = native_fast if kernel == "native" else python_fast
                measured = _run(fingerprinter, articles, batch=path == "batch")
                progress.advance()
                if (kernel, path) not in best or measured[1] < best[kernel, path][1]:
                    best[kernel, path] = measured
    return best, {"native": native_setup, "python": python_setup}


def _agreement(
    expected: list[Fingerprint | None], fingerprints: list[Fingerprint | None]
) -> dict[str, float | int]:
    """How many fingerprints equal jieba's, and how far the others are (SimHash bits)."""
    pairs = list(zip(expected, fingerprints, strict=True))
    same = sum(a == b for a, b in pairs)
    distances = [hamming(a.simhash, b.simhash) for a, b in pairs if a and b and a != b]
    return {
        "identical_share": same / len(pairs),
        "differing": len(pairs) - same,
        "max_distance_when_differing": max(distances, default=0),
    }


def _report(
    args: argparse.Namespace,
    articles: list[tuple[str, str]],
    expected: list[Fingerprint | None],
    jieba: EngineResult,
    fast: dict[tuple[str, str], EngineResult],
    best: dict[tuple[str, str], _Measured],
) -> dict:
    n = len(articles)
    floor = _segmenter_floor(articles)
    normalization, t2s = _normalization_floor(articles)
    native_batch = fast["native", "batch"]
    return {
        "data": args.data,
        "articles": n,
        "avg_chars": sum(len(t) + len(c) for t, c in articles) / n,
        "repeat": args.repeat,
        "engines": {"jieba": asdict(jieba), "rjieba": asdict(native_batch)},
        "variants": [asdict(r) for r in fast.values()],
        "speedup": native_batch.docs_per_cpu_second / jieba.docs_per_cpu_second,
        "native_speedup": native_batch.docs_per_cpu_second
        / fast["python", "batch"].docs_per_cpu_second,
        **_agreement(expected, best["native", "batch"][2]),
        "agreement": {
            f"{k} {p}": _agreement(expected, fps) for (k, p), (_, _, fps) in best.items()
        },
        "native_equals_python": best["native", "batch"][2] == best["python", "batch"][2],
        "rjieba_cut_only_docs_per_cpu_second": floor,
        "normalization_only_docs_per_cpu_second": normalization,
        "opencc_t2s_only_docs_per_cpu_second": t2s,
    }


def _print_report(
    report: dict, jieba: EngineResult, fast: dict[tuple[str, str], EngineResult], repeat: int
) -> None:
    articles, chars = report["articles"], report["avg_chars"]
    print(f"{report['data']}: {articles:,} articles, {chars:,.0f} chars on average")
    print(
        f"{'engine':8} {'kernel':7} {'path':12} {'docs/s':>8} {'MB/s':>6} {'docs/CPU-s':>11} "
        f"{'setup s':>8} {'errors':>6}  identical to jieba"
    )
    agreements = report["agreement"]
    rows = [(jieba, None)] + [(r, agreements[f"{r.kernel} {r.path}"]) for r in fast.values()]
    for r, agreed in rows:
        same = (
            "—"
            if agreed is None
            else f"{agreed['identical_share']:.4%} ({agreed['differing']} differ, "
            f"max distance {agreed['max_distance_when_differing']})"
        )
        print(
            f"{r.engine:8} {r.kernel:7} {r.path:12} {r.docs_per_second:8,.0f} "
            f"{r.mb_per_second:6.2f} {r.docs_per_cpu_second:11,.0f} {r.setup_seconds:8.2f} "
            f"{r.errors:6}  {same}"
        )
    print(f"rjieba: fastest of {repeat} alternating rounds per variant")
    print(
        "native kernel = Python code (batch): "
        f"{'identical' if report['native_equals_python'] else 'DIFFERENT'} fingerprints; "
        f"{report['native_speedup']:.2f}× the docs/CPU-s"
    )
    floor = report["rjieba_cut_only_docs_per_cpu_second"]
    normalization = report["normalization_only_docs_per_cpu_second"]
    t2s = report["opencc_t2s_only_docs_per_cpu_second"]
    print(f"rjieba.cut alone on normalized text: {floor:,.0f} docs/CPU-s (the segmenter's floor)")
    print(
        f"normalization alone: {normalization:,.0f} docs/CPU-s, of which OpenCC t2s alone: "
        f"{t2s:,.0f} docs/CPU-s (not in the native kernel)"
    )
