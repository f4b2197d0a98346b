"""The service's Prometheus metrics (names fixed by DESIGN.md), in a registry of their own."""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

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
        self.redeliveries = Counter(
            "newsdedup_redelivered",
            "Articles answered from the article table (same id and text)",
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
        self.ready = Gauge("newsdedup_ready", "1 when /readyz answers 200", registry=r)
        self.build_info = Info("newsdedup_build", "Version of newsdedup and Python", registry=r)
        self.build_info.info({"version": __version__, "python": platform.python_version()})
