"""The service's Prometheus metrics (their names are a contract), in a registry of their own.

Besides the pipeline's figures: memory and CPU of this process and of its child processes
(the fingerprinting pool), so a dashboard shows what the whole service costs.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from consumer import __version__

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.articles = Counter(
            "newsdedup_articles", "Articles decided, by decision", ["decision"], registry=r
        )
        self.invalid = Counter(
            "newsdedup_invalid",
            "Messages sent to the dead-letter topic, by reason",
            ["reason"],
            registry=r,
        )
        self.process_seconds = Histogram(
            "newsdedup_process_seconds",
            "Per article: from the poll that returned it until its decision is durable",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_seconds = Histogram(
            "newsdedup_stage_seconds",
            "Per batch: time spent in each stage",
            ["stage"],
            buckets=_STAGE_BUCKETS,
            registry=r,
        )
        self.match_distance = Histogram(
            "newsdedup_match_distance",
            "Hamming distance of duplicates to their match",
            buckets=tuple(range(0, 17)),
            registry=r,
        )
        self.batch_size = Histogram(
            "newsdedup_batch_messages",
            "Messages per processed batch",
            buckets=(1, 10, 50, 100, 250, 500, 1000, 2500, 5000),
            registry=r,
        )
        self.index_articles = Gauge(
            "newsdedup_index_articles", "Live articles in the index", registry=r
        )
        self.index_segments = Gauge(
            "newsdedup_index_segments", "Live time segments in the index", registry=r
        )
        self.index_memory_bytes = Gauge(
            "newsdedup_index_memory_bytes",
            "Memory of the index by part: RocksDB's block cache (memtables are charged to it), "
            "memtables, table readers, and the search tables",
            ["part"],
            registry=r,
        )
        self.index_disk_bytes = Gauge(
            "newsdedup_index_disk_bytes", "Bytes of the index directory on disk", registry=r
        )
        self.segments_expired = Counter(
            "newsdedup_segments_expired", "Index segments dropped by expiry", registry=r
        )
        self.consumer_lag = Gauge(
            "newsdedup_consumer_lag",
            "Messages behind the high watermark, per input partition",
            ["topic", "partition"],
            registry=r,
        )
        self.event_lag_seconds = Gauge(
            "newsdedup_event_lag_seconds",
            "Wall clock minus the event time of the last decided article",
            registry=r,
        )
        self.late_articles = Counter(
            "newsdedup_late_articles",
            "Articles older than the window: checked, not indexed",
            registry=r,
        )
        self.out_of_order = Counter(
            "newsdedup_out_of_order_articles",
            "Dated articles that arrived behind a later-dated one of their partition; "
            "window=absorbed: put back in order by the reorder window, window=exceeded: they "
            "came after their partition's time had passed them",
            ["window"],
            registry=r,
        )
        self.batch_retries = Counter(
            "newsdedup_batch_retries",
            "Batches rewound and retried after an output failure",
            registry=r,
        )
        self.assigned_partitions = Gauge(
            "newsdedup_assigned_partitions",
            "Input partitions assigned to this instance",
            registry=r,
        )
        self.input_partitions = Gauge(
            "newsdedup_input_partitions",
            "Partitions of the input topic, as the broker's metadata last said",
            registry=r,
        )
        self.input_records_skipped = Counter(
            "newsdedup_input_records_skipped",
            "Input records never read, by reason (retention: deleted by the broker before the "
            "service read them)",
            ["reason"],
            registry=r,
        )
        self.input_records_skipped.labels("retention")
        # Scale-out roles (README, "Scale-out").
        self.fingerprinted = Counter(
            "newsdedup_fingerprinted",
            "Articles fingerprinted and sent to the internal topic (role fingerprint)",
            registry=r,
        )
        self.changelog_records = Counter(
            "newsdedup_changelog_records",
            "Index records written to the changelog topic (role decide)",
            registry=r,
        )
        self.reorder_overflow = Counter(
            "newsdedup_reorder_overflow",
            "Articles decided without waiting for a slower feed partition because the reorder "
            "buffer was full (role decide; they may be decided out of publish order)",
            registry=r,
        )
        self.restore_records = Counter(
            "newsdedup_restore_records",
            "Changelog records read while restoring indexes (role decide)",
            registry=r,
        )
        self.restore_remaining = Gauge(
            "newsdedup_restore_remaining_records",
            "Changelog records still to read before the partition can be decided",
            ["partition"],
            registry=r,
        )
        self.restoring_partitions = Gauge(
            "newsdedup_restoring_partitions",
            "Assigned internal partitions whose indexes are being restored",
            registry=r,
        )
        self.restore_seconds = Counter(
            "newsdedup_restore_seconds",
            "Time spent restoring indexes from the changelog",
            registry=r,
        )
        self.ready = Gauge("newsdedup_ready", "1 when /readyz answers 200", registry=r)
        self.build_info = Info("newsdedup_build", "Version of newsdedup and Python", registry=r)
        self.build_info.info({"version": __version__, "python": platform.python_version()})
        # newsdedup_process_{cpu_seconds_total,resident_memory_bytes,...} of this process only
        ProcessCollector(namespace="newsdedup", registry=r)
        r.register(ChildProcessCollector())


class ChildProcessCollector(Collector):
    """CPU and resident memory summed over this process's children, read from /proc at scrape
    time: the worker pool costs the hot path nothing, and a pool that the multiprocessing
    module restarts is still counted. Yields nothing where /proc is missing (not Linux).

    The CPU sum drops when a child exits; Prometheus's rate() takes that as a counter reset.
    """

    _TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    _PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        if not Path("/proc/self/stat").exists():
            return
        count, cpu_s, rss = 0, 0.0, 0
        for pid in _child_pids():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue  # exited between listing and reading
            # Fields after the parenthesised command name, which may itself hold spaces.
            fields = stat.rpartition(")")[2].split()
            count += 1
            cpu_s += (int(fields[11]) + int(fields[12])) / self._TICKS  # utime, stime
            rss += int(fields[21]) * self._PAGE
        yield GaugeMetricFamily(
            "newsdedup_child_processes",
            "Child processes of the service (fingerprinting workers and their helpers)",
            value=count,
        )
        yield CounterMetricFamily(
            "newsdedup_child_cpu_seconds",
            "User and system CPU time of the live child processes, summed",
            value=cpu_s,
        )
        yield GaugeMetricFamily(
            "newsdedup_child_resident_memory_bytes",
            "Resident memory of the child processes, summed",
            value=rss,
        )


def _child_pids() -> set[int]:
    # Every thread's list: the pool's handler thread, not the main one, replaces dead workers.
    pids: set[int] = set()
    for children in Path("/proc/self/task").glob("*/children"):
        try:
            pids.update(int(p) for p in children.read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return pids
