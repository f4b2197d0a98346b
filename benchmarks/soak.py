"""`python -m benchmarks soak`: the service under a steady live feed for minutes, against a real
broker, watched for what only time shows: throughput that sags, memory that creeps, disk that
outgrows the window.

Articles of a corpus are replayed at a fixed offered rate as if live: each gets a new id and
`published_at` = now, and a share of them are reposts of an article sent a little earlier (new
id, same text), so the index matches as well as inserts. The window is short (`--retention`,
default 5 min, segments of `--segment`), so segments expire several times during the run and
the index should stop growing once one window has passed. Every `--sample-every` seconds the
benchmark reads the service's /metrics, the RSS of its processes (service and workers) and
the size of its state directory; at the end it reports per sample and the trend of each over
the run's second half.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import KAFKA_LOCAL
from benchmarks.processes import load_feed, tree_rss
from consumer.errors import NewsdedupError
from consumer.harness.broker import PrivateBroker, Topics, free_port
from consumer.harness.service import service_env
from consumer.ops.progress import Progress
from consumer.quantities import parse_duration_ms

# How far back a repost reaches for its original: well inside the default window.
_REPOST_LOOKBACK = 2_000


@dataclass(frozen=True, slots=True)
class Sample:
    elapsed_s: float
    produced: int
    decided: int  # decisions + dead letters the service reports
    decided_per_s: float  # since the previous sample
    rss_mib: float  # the service and its worker processes
    main_rss_mib: float  # the service process alone
    block_cache_mib: float  # RocksDB's block cache, memtables included
    disk_mib: float
    index_articles: int
    index_segments: int
    segments_expired: int


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "soak",
        help="the service under a steady live feed: throughput, memory and disk over time",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, help="articles to replay, JSONL or .jsonl.gz")
    p.add_argument(
        "--minutes", type=float, default=20.0, help="length of the run (default %(default)s)"
    )
    p.add_argument(
        "--rate", type=float, default=200.0, help="offered articles/s (default %(default)s)"
    )
    p.add_argument(
        "--reposts", type=float, default=0.2, help="share of reposts (new id; default %(default)s)"
    )
    p.add_argument(
        "--retention", default="5m", help="[index] retention of the service (default %(default)s)"
    )
    p.add_argument(
        "--segment", default="30s", help="[index] segment of the service (default %(default)s)"
    )
    p.add_argument(
        "--sample-every",
        type=float,
        default=30.0,
        help="seconds between samples (default %(default)s)",
    )
    p.add_argument(
        "--delivery",
        default="at_least_once",
        help="the service's delivery mode (default %(default)s)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="fingerprinting processes (0 = cores; default %(default)s)",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=20_000,
        help="corpus articles to cycle through (default %(default)s)",
    )
    p.add_argument("--bootstrap-servers", help="an existing broker (default: start a private one)")
    p.add_argument(
        "--state",
        help="keep the service's index and log in this new directory (default: temporary)",
    )
    p.add_argument("--json", action="store_true", help="print samples and summary as JSON")
    p.set_defaults(handler=run_soak)


def run_soak(args: argparse.Namespace) -> int:
    parse_duration_ms(args.retention)  # a bad value fails here, before a broker starts
    articles = [json.loads(v) for v in load_feed(args.data, args.limit)]
    if not articles:
        raise NewsdedupError(f"{args.data} has no articles")
    duration = args.minutes * 60
    if args.state:
        Path(args.state).mkdir(parents=True)  # a new one: never mix two runs' files
    with (
        PrivateBroker(args.bootstrap_servers, KAFKA_LOCAL) as bootstrap,
        contextlib.nullcontext(args.state)
        if args.state
        else tempfile.TemporaryDirectory(prefix="newsdedup-soak-") as state,
    ):
        topics = Topics.create(bootstrap, 3, "bench")
        service = _start_service(bootstrap, topics, state, args)
        feed = _Feed(bootstrap, topics.input, articles, args.rate, args.reposts)
        samples: list[Sample] = []
        try:
            _wait_ready(service, timeout=120)
            feed.start()
            started = time.monotonic()
            with Progress("soak", total=int(duration), unit="s") as progress:
                while (elapsed := time.monotonic() - started) < duration:
                    time.sleep(min(args.sample_every, duration - elapsed))
                    if service.process.poll() is not None:
                        raise NewsdedupError(f"the service exited ({service.process.returncode})")
                    samples.append(_sample(service, state, feed, started, samples))
                    progress.advance(int(time.monotonic() - started) - progress.count)
        finally:
            feed.stop()
            code = service.stop()
        if code != 0:
            raise NewsdedupError(f"the service exited with {code} at SIGTERM")
    summary = _summary(samples, args)
    if args.json:
        print(json.dumps({"samples": [asdict(s) for s in samples], "summary": summary}, indent=2))
    else:
        _print(samples, summary, args)
    return 0


class _Feed:
    """Produces at a fixed rate in a thread: corpus articles with fresh ids, published now."""

    def __init__(
        self, bootstrap: str, topic: str, articles: list[dict], rate: float, reposts: float
    ) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
        )
        self.topic, self.articles, self.rate, self.reposts = topic, articles, rate, reposts
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        # Stopped before it started (a SIGTERM while the service was still starting).
        if self._thread.is_alive():
            self._thread.join(30)
        self.producer.flush(30)
        del self.producer  # disconnect now, not when the broker is already gone

    def _run(self) -> None:
        rng = random.Random(0)
        run = uuid.uuid4().hex[:6]
        started = time.monotonic()
        while not self._stop.is_set():
            i = self.sent
            if i and rng.random() < self.reposts:
                source = self.articles[
                    rng.randrange(max(0, i - _REPOST_LOOKBACK), i) % len(self.articles)
                ]
            else:
                source = self.articles[i % len(self.articles)]
            article = {
                "id": f"soak-{run}-{i}",
                "title": source.get("title") or "",
                "content": source.get("content") or "",
                "published_at": datetime.now(UTC).isoformat(),
            }
            value = json.dumps(article, ensure_ascii=False).encode()
            while True:
                try:
                    self.producer.produce(self.topic, value=value, key=article["id"].encode())
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)
            self.sent += 1
            ahead = self.sent / self.rate - (time.monotonic() - started)
            if ahead > 0:
                self._stop.wait(ahead)


class _SoakService:
    def __init__(self, process: subprocess.Popen, metrics_port: int) -> None:
        self.process = process
        self.metrics_port = metrics_port

    def metrics(self) -> dict[str, float]:
        """Sums of every sample of each metric family (labels added up), and each labelled
        sample as "name:value,value"."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        totals: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                totals[s.name] = totals.get(s.name, 0.0) + s.value
                if s.labels:
                    totals[f"{s.name}:{','.join(s.labels.values())}"] = s.value
        return totals

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _start_service(
    bootstrap: str, topics: Topics, state: str, args: argparse.Namespace
) -> _SoakService:
    port = free_port()
    env = {
        **service_env(bootstrap, topics, "soak", args.delivery),
        "NEWSDEDUP_INDEX_PATH": str(Path(state) / "index"),
        "NEWSDEDUP_INDEX_RETENTION": args.retention,
        "NEWSDEDUP_INDEX_SEGMENT": args.segment,
        "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{port}",
        "NEWSDEDUP_SERVICE_WORKERS": str(args.workers),
        "NEWSDEDUP_LOG_LEVEL": "WARNING",
    }
    newsdedup = str(Path(sys.executable).parent / "newsdedup")
    log = open(Path(state) / "service.log", "wb")  # noqa: SIM115 - the child keeps it open
    process = subprocess.Popen([newsdedup, "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return _SoakService(process, port)


def _wait_ready(service: _SoakService, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{service.metrics_port}/readyz"
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise NewsdedupError(f"the service exited ({service.process.returncode}) at start")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise NewsdedupError(f"the service did not become ready within {timeout:.0f}s")


def _disk_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue  # RocksDB removed it meanwhile
    return total


def _sample(
    service: _SoakService, state: str, feed: _Feed, started: float, previous: list[Sample]
) -> Sample:
    m = service.metrics()
    decided = int(m.get("newsdedup_articles_total", 0) + m.get("newsdedup_invalid_total", 0))
    elapsed = time.monotonic() - started
    last_elapsed, last_decided = (
        (previous[-1].elapsed_s, previous[-1].decided) if previous else (0.0, 0)
    )
    return Sample(
        elapsed_s=round(elapsed, 1),
        produced=feed.sent,
        decided=decided,
        decided_per_s=round((decided - last_decided) / max(elapsed - last_elapsed, 1e-3), 1),
        rss_mib=round(tree_rss(service.process.pid) / 2**20, 1),
        main_rss_mib=round(m.get("newsdedup_process_resident_memory_bytes", 0) / 2**20, 1),
        block_cache_mib=round(m.get("newsdedup_index_memory_bytes:block_cache", 0) / 2**20, 1),
        disk_mib=round(_disk_bytes(state) / 2**20, 1),
        index_articles=int(m.get("newsdedup_index_articles", 0)),
        index_segments=int(m.get("newsdedup_index_segments", 0)),
        segments_expired=int(m.get("newsdedup_segments_expired_total", 0)),
    )


def _slope_per_10_min(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs (seconds), per 10 minutes."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if not var:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var * 600


def _summary(samples: list[Sample], args: argparse.Namespace) -> dict[str, float]:
    """Over the second half of the run, after the window has filled once."""
    half = samples[len(samples) // 2 :] or samples
    xs = [s.elapsed_s for s in half]
    rates = [s.decided_per_s for s in half]
    last = samples[-1] if samples else None
    return {
        "offered_per_s": args.rate,
        "decided_per_s_mean": round(sum(rates) / len(rates), 1) if rates else 0.0,
        "decided_per_s_min": min(rates, default=0.0),
        "decided_per_s_max": max(rates, default=0.0),
        "backlog_at_end": (last.produced - last.decided) if last else 0,
        "rss_mib_first_half_max": max((s.rss_mib for s in samples[: len(samples) // 2]), default=0),
        "rss_mib_second_half_max": max((s.rss_mib for s in half), default=0.0),
        "rss_mib_per_10_min": round(_slope_per_10_min(xs, [s.rss_mib for s in half]), 2),
        "main_rss_mib_per_10_min": round(_slope_per_10_min(xs, [s.main_rss_mib for s in half]), 2),
        "block_cache_mib_max": max((s.block_cache_mib for s in samples), default=0.0),
        "disk_mib_max": max((s.disk_mib for s in samples), default=0.0),
        "disk_mib_per_10_min": round(_slope_per_10_min(xs, [s.disk_mib for s in half]), 2),
        "index_articles_max": max((s.index_articles for s in samples), default=0),
        "segments_expired": last.segments_expired if last else 0,
    }


def _print(samples: list[Sample], summary: dict[str, float], args: argparse.Namespace) -> None:
    print(
        f"bench soak: {args.data}, {args.minutes:g} min at {args.rate:g}/s offered, "
        f"{args.reposts:.0%} reposts, window {args.retention} in segments of {args.segment}, "
        f"{args.delivery}"
    )
    print(
        f"{'s':>6} {'produced':>9} {'decided':>9} {'per s':>7} {'RSS MiB':>8} {'main':>6} "
        f"{'cache':>6} {'disk MiB':>9} "
        f"{'indexed':>8} {'segments':>8} {'expired':>8}"
    )
    for s in samples:
        print(
            f"{s.elapsed_s:>6.0f} {s.produced:>9} {s.decided:>9} {s.decided_per_s:>7.1f} "
            f"{s.rss_mib:>8.0f} {s.main_rss_mib:>6.0f} {s.block_cache_mib:>6.1f} "
            f"{s.disk_mib:>9.1f} {s.index_articles:>8} {s.index_segments:>8} "
            f"{s.segments_expired:>8}"
        )
    print("second half:", ", ".join(f"{k}={v}" for k, v in summary.items()))
