"""`make demo` (scripts/demo): a local broker, a synthetic feed, the real service, and a
summary of its decisions.

Everything it starts it stops again, also on failure or Ctrl-C. State lives under `.demo/`.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer

from consumer.samplefeed import write_feed

# A checkout-only tool: the checkout's broker script is found from here.
REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".demo"
KAFKA_PORT = int(os.environ.get("DEMO_KAFKA_PORT", "19092"))
METRICS_PORT = int(os.environ.get("DEMO_METRICS_PORT", "19108"))
# The broker's KRaft controller takes a port too (kafka-local: the client port + 1): never the
# metrics port.
CONTROLLER_PORT = KAFKA_PORT + (1 if KAFKA_PORT + 1 != METRICS_PORT else 2)
STORIES = int(os.environ.get("DEMO_STORIES", "400"))
INPUT, OUTPUT, DLQ = "demo.news.raw", "demo.news.decisions", "demo.news.dlq"
CATCH_UP_TIMEOUT_S = 300


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


def main() -> int:
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir()
    bin_dir = Path(sys.executable).parent
    newsdedup = str(bin_dir / "newsdedup")
    kafka_env = {
        **os.environ,
        "KAFKA_PORT": str(KAFKA_PORT),
        "KAFKA_CONTROLLER_PORT": str(CONTROLLER_PORT),
        "KAFKA_DATA_DIR": str(WORK / "kafka"),
        "PYTHON": sys.executable,
    }
    kafka_local = str(REPO / "scripts" / "kafka-local")
    service: subprocess.Popen | None = None
    say(f"starting a local Kafka broker on 127.0.0.1:{KAFKA_PORT} (first run downloads its jars)")
    started = subprocess.run([kafka_local, "start"], env=kafka_env, capture_output=True, text=True)
    if started.returncode != 0:
        sys.stderr.write(started.stdout + started.stderr)
        return 1
    bootstrap = started.stdout.strip().splitlines()[-1]
    try:
        feed = WORK / "sample-feed.jsonl"
        count = write_feed(str(feed), stories=STORIES)
        say(f"generated a synthetic feed of {count} messages in {feed.relative_to(REPO)}")
        say(f"producing it to topic {INPUT}")
        subprocess.run(
            [
                newsdedup,
                "produce",
                str(feed),
                "--topic",
                INPUT,
                "--create",
                "--partitions",
                "3",
                "--bootstrap-servers",
                bootstrap,
            ],
            check=True,
        )
        env = {
            **os.environ,
            "NEWSDEDUP_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "NEWSDEDUP_KAFKA_INPUT_TOPIC": INPUT,
            "NEWSDEDUP_KAFKA_OUTPUT_TOPIC": OUTPUT,
            "NEWSDEDUP_KAFKA_DLQ_TOPIC": DLQ,
            "NEWSDEDUP_KAFKA_GROUP_ID": "newsdedup-demo",
            "NEWSDEDUP_INDEX_PATH": str(WORK / "state"),
            "NEWSDEDUP_METRICS_LISTEN": f"127.0.0.1:{METRICS_PORT}",
        }
        say(f"running the service (metrics on http://127.0.0.1:{METRICS_PORT}/metrics)")
        log_path = WORK / "service.log"
        with log_path.open("w") as log:
            service = subprocess.Popen([newsdedup, "run"], env=env, stdout=log, stderr=log)
        decisions, dead = _collect(bootstrap, count, service)
        say("stopping the service")
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=30)
        service = None
        _summarize(feed, decisions, dead)
        say(f"service log: {log_path.relative_to(REPO)}")
        return 0
    finally:
        if service is not None:
            service.kill()
            service.wait()
        say("stopping the broker")
        subprocess.run([kafka_local, "stop"], env=kafka_env, capture_output=True)


def _collect(bootstrap: str, expected: int, service: subprocess.Popen) -> tuple[list[dict], int]:
    """Read decisions and dead letters until every produced message is accounted for."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-reader-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([OUTPUT, DLQ])
    decisions: list[dict] = []
    dead = 0
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    try:
        while len(decisions) + dead < expected:
            if service.poll() is not None:
                raise SystemExit(
                    f"the service exited with code {service.returncode}; see .demo/service.log"
                )
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"timed out: {len(decisions) + dead} of {expected} messages decided"
                )
            for record in consumer.consume(500, 1.0):
                if record.error():
                    continue
                if record.topic() == OUTPUT:
                    decisions.append(json.loads(record.value()))
                else:
                    dead += 1
    finally:
        consumer.close()
    return decisions, dead


def _summarize(feed: Path, decisions: list[dict], dead: int) -> None:
    titles = {}
    with feed.open(encoding="utf-8") as f:
        for line in f:
            article = json.loads(line)
            if "id" in article:
                titles[article["id"]] = article.get("title", "")
    kinds = collections.Counter(d["decision"] for d in decisions)
    print()
    print(f"Decisions: {len(decisions)}  (dead-lettered: {dead})")
    for kind in ("unique", "duplicate", "near_duplicate"):
        print(f"  {kind:<15} {kinds.get(kind, 0):>6}")
    clusters = collections.Counter(d["cluster_id"] for d in decisions)
    print("\nLargest clusters (articles, first article's title):")
    for cluster_id, size in clusters.most_common(5):
        print(f"  {size:>3}  {titles.get(cluster_id, '?')[:60]}  [{cluster_id}]")
    print()


if __name__ == "__main__":
    sys.exit(main())
