"""Observability against the real thing: a real Prometheus scrapes a real `newsdedup run` on the
real broker, and every query of every Grafana panel must return data; /healthz and /readyz
answer correctly before assignment, while running and after the broker is gone."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from service_support import NEWSDEDUP, ServiceProcess, Topics, free_port, produce, wait_until

from consumer.ops.logs import log_event, setup_logging
from consumer.ops.metrics import Metrics
from consumer.samplefeed import generate_feed

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = REPO_ROOT / "config" / "grafana" / "dashboards" / "newsdedup.json"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
# Grafana's variables, made concrete for a test that lasts seconds: 15 scrapes per rate window.
GRAFANA_VARIABLES = {"$__rate_interval": "15s", "$__range": "5m", "$__interval": "1s"}


class Prometheus:
    """A Prometheus server of the test's own, scraping one target every second."""

    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: newsdedup\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log_path = workdir / "prometheus.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._ready, timeout=30, what="Prometheus to be ready")

    def _ready(self) -> bool:
        assert self.process.poll() is None, self.log_path.read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> dict:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator:
    started: list[Prometheus] = []

    def start(target: str) -> Prometheus:
        if not Path(PROMETHEUS).exists():
            pytest.fail("prometheus is missing; `make system-deps` installs the Debian package")
        started.append(Prometheus(tmp_path / "prometheus", target))
        return started[-1]

    (tmp_path / "prometheus").mkdir()
    yield start
    for p in started:
        p.stop()


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, Grafana variables substituted."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"panel {panel['title']!r}: unknown variable in {expr}"
            queries.append((panel["title"], expr))
    return queries


def status(service: ServiceProcess, path: str) -> int | None:
    """HTTP status of `path`, None while the service's HTTP server is not listening yet."""
    try:
        return service.get(path)[0]
    except OSError:
        return None


def has_data(result: list[dict]) -> bool:
    """At least one series with a number: histogram_quantile over no observations gives NaN."""
    return any(not math.isnan(float(series["value"][1])) for series in result)


def valid_count(feed: list[dict]) -> int:
    """Messages of the sample feed that get a decision (its invalid ones lack an id or text)."""
    return sum(1 for m in feed if m.get("id") and (m.get("title") or "").strip())


@pytest.mark.kafka
def test_every_dashboard_query_returns_data_from_a_real_run(
    kafka_bootstrap, new_topic, tmp_path, prometheus_factory
):
    topics = Topics(new_topic("obs-in", partitions=2), new_topic("obs-out"), new_topic("obs-dlq"))
    feed = list(generate_feed(stories=150, seed=3, start=datetime.now(UTC) - timedelta(hours=48)))

    with ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "service.log",
        group_id=f"obs-{uuid.uuid4().hex[:8]}",
        # The pool's own processes must show up in the child-process metrics.
        service_workers="2",
        index_retention="72h",
        index_segment="1h",
    ) as service:
        wait_until(lambda: status(service, "/readyz") == 200, 90, what="/readyz 200")
        prometheus = prometheus_factory(f"127.0.0.1:{service.metrics_port}")

        def scraped(expected: int) -> bool:
            result = prometheus.query("sum(newsdedup_articles_total)")
            return has_data(result) and float(result[0]["value"][1]) == expected

        # A first part creates every series; librdkafka reports lag every 5 s. rate() needs
        # two samples of a series, so the rest of the feed comes in small parts over several
        # scrapes: each labelled series then grows inside the rate window.
        head, tail = feed[: len(feed) // 4], feed[len(feed) // 4 :]
        produce(kafka_bootstrap, topics.input, head)
        wait_until(lambda: scraped(valid_count(head)), 60, what="the first part scraped")
        wait_until(
            lambda: prometheus.query("newsdedup_consumer_lag"), 20, what="consumer lag scraped"
        )
        for i in range(0, len(tail), 40):
            produce(kafka_bootstrap, topics.input, tail[i : i + 40])
            time.sleep(0.5)
        wait_until(lambda: scraped(valid_count(feed)), 60, what="every decision scraped")
        time.sleep(2)  # a few more scrapes, so even the last new series has two samples

        # Every query at one instant, so how long the checks take does not move the windows.
        at = str(time.time())
        known = set(prometheus.api("label/__name__/values"))
        failures = []
        for title, expr in dashboard_queries():
            missing = set(re.findall(r"\bnewsdedup_\w+", expr)) - known
            if missing:
                failures.append(f"{title!r}: {expr} refers to unknown metrics {sorted(missing)}")
            elif not has_data(prometheus.api("query", query=expr, time=at)["result"]):
                failures.append(f"{title!r}: {expr} returned no data")
        assert not failures, "\n".join(failures) + "\n\nservice log:\n" + service.log()[-3000:]


@pytest.mark.kafka
def test_health_before_assignment_while_running_and_after_the_broker_stops(kafka_local, tmp_path):
    bootstrap = kafka_local.start()
    name = uuid.uuid4().hex[:8]
    topics = Topics(f"health-in-{name}", f"health-out-{name}", f"health-dlq-{name}")

    with ServiceProcess(
        bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "service.log",
        group_id=f"health-{name}",
        service_stuck_after="20s",
    ) as service:
        # Before assignment: the input topic does not exist yet.
        wait_until(lambda: status(service, "/readyz") == 503, 30, what="/readyz 503")
        wait_until(lambda: "health-in" in service.get("/readyz")[1], 30, what="/readyz reason")
        assert status(service, "/healthz") == 200

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topics.input, 1, 1)])[topics.input].result(timeout=30)
        wait_until(lambda: status(service, "/readyz") == 200, 60, what="/readyz 200")
        assert service.get("/healthz") == (200, "ok\n")
        assert "newsdedup_ready 1.0" in service.get("/metrics")[1]

        kafka_local.stop()
        stopped = time.monotonic()
        wait_until(lambda: status(service, "/readyz") == 503, 30, what="/readyz 503 without broker")
        reason = service.get("/readyz")[1]
        assert "broker" in reason, reason
        # Not ready, but alive: the loop keeps turning while the broker is away.
        assert status(service, "/healthz") == 200
        assert service.running()
        print(f"not ready {time.monotonic() - stopped:.1f}s after the broker stopped")


# name as exposed → type, for every metric the contract fixes (base units, counters in _total)
DESIGN_METRICS = {
    "newsdedup_articles_total": "counter",
    "newsdedup_invalid_total": "counter",
    "newsdedup_process_seconds": "histogram",
    "newsdedup_stage_seconds": "histogram",
    "newsdedup_match_distance": "histogram",
    "newsdedup_index_articles": "gauge",
    "newsdedup_index_segments": "gauge",
    "newsdedup_index_disk_bytes": "gauge",
    "newsdedup_segments_expired_total": "counter",
    "newsdedup_consumer_lag": "gauge",
    "newsdedup_event_lag_seconds": "gauge",
    "newsdedup_late_articles_total": "counter",
    "newsdedup_build_info": "gauge",
    "newsdedup_assigned_partitions": "gauge",
    "newsdedup_input_partitions": "gauge",
    "newsdedup_input_records_skipped_total": "counter",
}


def test_every_design_metric_is_exported_with_its_type() -> None:
    families = {}
    for family in Metrics().registry.collect():
        # prometheus-client names a counter family without _total and an Info with _info
        name = family.name + {"counter": "_total", "info": "_info"}.get(family.type, "")
        families[name] = "gauge" if family.type == "info" else family.type

    for name, kind in DESIGN_METRICS.items():
        assert families.get(name) == kind, f"{name}: {families.get(name)}, expected {kind}"
    assert all(name.startswith("newsdedup_") for name in families)


def test_json_log_lines_keep_fields_apart(capsys) -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    setup_logging("INFO", "json")
    try:
        log_event(logging.getLogger("newsdedup.test"), logging.INFO, "partitions assigned", n=3)
        line = json.loads(capsys.readouterr().err)
    finally:
        # pytest's own handlers come back; ours wrote to capsys's stream, closed after the test
        root.handlers[:], root.level = handlers, level
    assert line["event"] == "partitions assigned"
    assert line["n"] == 3
    assert line["level"] == "INFO"


def test_a_busy_metrics_port_is_one_line_and_exit_2(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {
            **os.environ,
            "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{port}",
            "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
            "NEWSDEDUP_INDEX_PATH": str(tmp_path / "state"),
        }
        done = subprocess.run(
            [NEWSDEDUP, "run"], env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("newsdedup: error: option [metrics] listen: cannot listen on")
    assert "in use" in lines[0]
