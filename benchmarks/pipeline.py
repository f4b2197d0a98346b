"""`python -m benchmarks pipeline`: the whole service against a real broker, per delivery mode.

Two measurements per mode, each on fresh topics and a fresh index:
- full speed: N articles preloaded, then the service started; throughput is N over the time
  from its first to its last decision (startup excluded, all processes included);
- fixed rate: articles produced at R per second while the service runs, each dated as it is
  sent, as a live feed's are (an article dated long ago is a backfill's, which may wait at
  a partition's end for a retried batch: `[service] reorder_hold`); latency is each
  decision's Kafka timestamp minus its input message's Kafka timestamp (both CreateTime).
Peak RSS sums the service and its worker processes, sampled from /proc; so does the CPU time
behind "articles per CPU-second" (full speed: the CPU the service and its workers spent from
the first decision to the last), which a busy machine disturbs far less than the wall clock.
`--service-path` runs the service from another checkout under the same harness, for a before
and after in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Producer

from benchmarks import KAFKA_LOCAL
from benchmarks.processes import load_feed, tree_cpu_seconds, tree_rss
from consumer.errors import NewsdedupError
from consumer.harness.broker import PrivateBroker, Topics, client_settings, free_port
from consumer.harness.records import InputRecord, decision_reader, produce
from consumer.harness.service import ServiceProcess, service_env
from consumer.ops.progress import Progress


@dataclass(frozen=True, slots=True)
class RunResult:
    delivery: str
    mode: str  # "full_speed" or "rate=R/s"
    articles: int
    decided: int
    seconds: float
    articles_per_s: float
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    peak_rss_mib: float
    articles_per_cpu_s: float | None = None  # full speed: decided / the service's CPU seconds


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="end-to-end throughput and latency of `newsdedup run` on a real broker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, help="articles, JSONL or .jsonl.gz")
    p.add_argument(
        "--limit",
        type=int,
        default=20_000,
        help="articles for the full-speed run (default %(default)s)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="offered articles/s (0 = skip; default %(default)s)",
    )
    p.add_argument(
        "--rate-seconds",
        type=float,
        default=20.0,
        help="length of the fixed-rate run (default %(default)s)",
    )
    p.add_argument(
        "--delivery",
        default="at_least_once,exactly_once",
        help="comma-separated delivery modes (default both)",
    )
    p.add_argument(
        "--partitions", type=int, default=3, help="input topic partitions (default %(default)s)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="fingerprinting processes (0 = cores; default %(default)s)",
    )
    p.add_argument("--bootstrap-servers", help="an existing broker (default: start a private one)")
    p.add_argument(
        "--scrape-compare",
        action="store_true",
        help="also run full speed while /metrics is scraped twice a second, to show its cost",
    )
    p.add_argument(
        "--cycle",
        action="store_true",
        help="when --limit exceeds the corpus, repeat it with new ids and a round number in the "
        "title (later rounds are near-duplicates of the first: for memory at a large window, "
        "not a realistic feed)",
    )
    p.add_argument(
        "--service-path",
        help="run the service from this checkout (put first on its PYTHONPATH; the harness "
        "stays this one): a before/after in one run",
    )
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.set_defaults(handler=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    wanted = args.limit + int(args.rate * args.rate_seconds)
    values = load_feed(args.data, wanted)
    if args.cycle and values:
        values = _cycled(values, wanted)
    if len(values) < args.limit:
        raise NewsdedupError(f"{args.data} has only {len(values)} articles")
    results: list[RunResult] = []
    with PrivateBroker(args.bootstrap_servers, KAFKA_LOCAL) as bootstrap:
        for delivery in args.delivery.split(","):
            results.append(_full_speed(bootstrap, values[: args.limit], delivery, args))
            if args.scrape_compare:
                results.append(
                    _full_speed(bootstrap, values[: args.limit], delivery, args, scrape=True)
                )
            if args.rate > 0:
                results.append(_fixed_rate(bootstrap, values[args.limit :], delivery, args))
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        _print_table(results, args)
    return 0


def _cycled(values: list[bytes], n: int) -> list[bytes]:
    """`values` repeated up to `n`, each later round with new ids and its round number in the
    title, so the index holds every copy (a verbatim copy with a new id would be held too,
    but as one fingerprint stored many times)."""
    out = list(values)
    articles = [json.loads(v) for v in values]
    round_no = 1
    while len(out) < n:
        for a in articles[: n - len(out)]:
            copy = {**a, "id": f"{a['id']}~{round_no}", "title": f"{a.get('title', '')} {round_no}"}
            out.append(json.dumps(copy, ensure_ascii=False).encode())
        round_no += 1
    return out


def _producer(bootstrap: str) -> Producer:
    return Producer(client_settings(bootstrap, **{"linger.ms": 5, "enable.idempotence": True}))


def _produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    rate: float = 0.0,
    producer: Producer | None = None,
    first_key: int = 0,
) -> None:
    """`values` keyed by their number; at `rate` per second, each dated as it is sent."""
    started = time.monotonic()

    def keep_rate(sent: int) -> None:
        ahead = sent / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)

    records = (
        InputRecord(str(i).encode(), _dated_now(value) if rate > 0 else value)
        for i, value in enumerate(values, first_key)
    )
    produce(
        producer or _producer(bootstrap),
        topic,
        records,
        after_each=keep_rate if rate > 0 else None,
        flush_s=60,
    )


def _dated_now(value: bytes) -> bytes:
    article = json.loads(value)
    article["published_at"] = datetime.now(UTC).isoformat()
    return json.dumps(article, ensure_ascii=False).encode()


class _Service:
    """`newsdedup run` as a subprocess, with its peak RSS (parent + workers) sampled."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        delivery: str,
        workers: int,
        state: str,
        scrape: bool = False,
        service_path: str | None = None,
    ) -> None:
        self.metrics_port = free_port()
        env = {
            **service_env(bootstrap, topics, "bench", delivery),
            "NEWSDEDUP_INDEX_PATH": str(Path(state) / "index"),
            "NEWSDEDUP_INDEX_RETENTION": "36500d",
            "NEWSDEDUP_INDEX_SEGMENT": "30d",
            "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{self.metrics_port}",
            "NEWSDEDUP_SERVICE_WORKERS": str(workers),
            "NEWSDEDUP_LOG_LEVEL": "WARNING",
        }
        if service_path:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(Path(service_path).resolve()), os.environ.get("PYTHONPATH")) if p
            )
        # The console script, not `python -m`, which would put the harness's own checkout
        # (the working directory) before --service-path's on the path.
        newsdedup = str(Path(sys.executable).parent / "newsdedup")
        self.instance = ServiceProcess(
            "newsdedup run", [newsdedup, "run"], env, Path(state) / "log"
        )
        self.instance.start()
        self.peak_rss = 0
        self.cpu_samples: list[tuple[float, float]] = []  # (wall clock ms, CPU seconds so far)
        self._sampling = True
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        if scrape:
            threading.Thread(target=self._scrape, daemon=True).start()

    def _scrape(self) -> None:
        """Fetch /metrics twice a second, ten times Prometheus's usual rate."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        while self._sampling:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    r.read()
            except OSError:
                pass  # not serving yet
            time.sleep(0.5)

    def _sample(self) -> None:
        while self._sampling:
            self.peak_rss = max(self.peak_rss, tree_rss(self.instance.pid))
            self.cpu_samples.append((time.time() * 1000, tree_cpu_seconds(self.instance.pid)))
            time.sleep(0.2)

    def cpu_between(self, first_ms: float, last_ms: float) -> float:
        """CPU seconds the service spent between two wall-clock times (to the nearest sample
        outside them: 0.2 s apart, a slight overcount)."""
        before = [cpu for at, cpu in self.cpu_samples if at <= first_ms]
        after = [cpu for at, cpu in self.cpu_samples if at >= last_ms]
        start = before[-1] if before else 0.0
        end = after[0] if after else (self.cpu_samples[-1][1] if self.cpu_samples else 0.0)
        return end - start

    def stop(self) -> None:
        self._sampling = False
        try:
            code = self.instance.stop("term")
        except NewsdedupError:
            return  # killed after the wait, as a hung service is: its figures stand
        if code not in (0, None):
            raise NewsdedupError(f"the service exited with {code}: {self.instance.last_lines(800)}")


def _read_decisions(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float, label: str
) -> dict[str, int]:
    """Article key → the decision's Kafka timestamp (ms), until `expected` are in."""
    reader = decision_reader(bootstrap, [(topic, partitions)], "bench-reader")
    seen: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    with Progress(label, total=expected, unit="decisions") as progress:
        while len(seen) < expected and time.monotonic() < deadline:
            for m in reader.consume(1000, 0.5):
                if m.error():
                    continue
                article_id = json.loads(m.value())["id"]
                if article_id not in seen:
                    seen[article_id] = m.timestamp()[1]
                    progress.advance()
    reader.close()
    return seen


def _input_times(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[str, int]:
    consumer = decision_reader(bootstrap, [(topic, partitions)], "bench-input")
    times: dict[str, int] = {}
    deadline = time.monotonic() + 120
    while len(times) < expected and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.5):
            if not m.error():
                times[json.loads(m.value())["id"]] = m.timestamp()[1]
    consumer.close()
    return times


def _full_speed(
    bootstrap: str,
    values: list[bytes],
    delivery: str,
    args: argparse.Namespace,
    scrape: bool = False,
) -> RunResult:
    topics = Topics.create(bootstrap, args.partitions, "bench")
    _produce(bootstrap, topics.input, values)
    mode = "full_speed+scrape" if scrape else "full_speed"
    with tempfile.TemporaryDirectory(prefix="newsdedup-bench-state-") as state:
        service = _Service(
            bootstrap, topics, delivery, args.workers, state, scrape, args.service_path
        )
        try:
            # At least 100 articles/s, or the run is reported as it stands (decided < articles).
            timeout = max(900.0, len(values) / 100)
            decided = _read_decisions(
                bootstrap,
                topics.output,
                args.partitions,
                len(values),
                timeout,
                f"{delivery} {mode}",
            )
        finally:
            service.stop()
    stamps = sorted(decided.values())
    seconds = max((stamps[-1] - stamps[0]) / 1000, 1e-3) if stamps else 0.0
    cpu = service.cpu_between(stamps[0], stamps[-1]) if stamps else 0.0
    return RunResult(
        delivery,
        mode,
        len(values),
        len(decided),
        round(seconds, 2),
        round(len(decided) / seconds, 1) if seconds else 0.0,
        None,
        None,
        round(service.peak_rss / 2**20, 1),
        round(len(decided) / cpu, 1) if cpu > 0 else None,
    )


def _fixed_rate(
    bootstrap: str, values: list[bytes], delivery: str, args: argparse.Namespace
) -> RunResult:
    topics = Topics.create(bootstrap, args.partitions, "bench")
    with tempfile.TemporaryDirectory(prefix="newsdedup-bench-state-") as state:
        service = _Service(
            bootstrap, topics, delivery, args.workers, state, service_path=args.service_path
        )
        try:
            # Let it join the group before the clock starts, so startup is not counted as latency;
            # the same producer goes on, so its own start (an idempotent producer id is fetched
            # from the broker before anything is sent) is not counted either.
            generator = _producer(bootstrap)
            _produce(bootstrap, topics.input, values[:1], producer=generator)
            _read_decisions(
                bootstrap, topics.output, args.partitions, 1, 120, f"{delivery} warm-up"
            )
            rest = values[1:]
            producer = threading.Thread(
                target=_produce, args=(bootstrap, topics.input, rest, args.rate, generator, 1)
            )
            started = time.monotonic()
            producer.start()
            decided = _read_decisions(
                bootstrap,
                topics.output,
                args.partitions,
                len(values),
                900,
                f"{delivery} at {args.rate:.0f}/s",
            )
            producer.join()
            seconds = time.monotonic() - started
        finally:
            service.stop()
    produced = _input_times(bootstrap, topics.input, args.partitions, len(values))
    latencies = sorted(decided[k] - produced[k] for k in decided if k in produced)
    return RunResult(
        delivery,
        f"rate={args.rate:.0f}/s",
        len(values),
        len(decided),
        round(seconds, 2),
        round(len(decided) / seconds, 1),
        _percentile(latencies, 0.50),
        _percentile(latencies, 0.99),
        round(service.peak_rss / 2**20, 1),
    )


def _percentile(sorted_values: list[int], q: float) -> float | None:
    if not sorted_values:
        return None
    return float(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))])


def _print_table(results: list[RunResult], args: argparse.Namespace) -> None:
    workers = args.workers or os.cpu_count()
    print(f"bench pipeline: {args.data}, partitions={args.partitions}, workers={workers}")
    print(
        f"{'delivery':<14} {'mode':<18} {'articles':>8} {'decided':>8} {'seconds':>8} "
        f"{'articles/s':>10} {'per CPU-s':>9} {'p50 ms':>8} {'p99 ms':>8} {'peak RSS MiB':>12}"
    )
    for r in results:
        p50 = "-" if r.latency_p50_ms is None else f"{r.latency_p50_ms:.0f}"
        p99 = "-" if r.latency_p99_ms is None else f"{r.latency_p99_ms:.0f}"
        per_cpu = "-" if r.articles_per_cpu_s is None else f"{r.articles_per_cpu_s:.0f}"
        print(
            f"{r.delivery:<14} {r.mode:<18} {r.articles:>8} {r.decided:>8} {r.seconds:>8.1f} "
            f"{r.articles_per_s:>10.0f} {per_cpu:>9} {p50:>8} {p99:>8} {r.peak_rss_mib:>12.0f}"
        )
