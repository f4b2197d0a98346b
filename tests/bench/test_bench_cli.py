"""The benchmarks' own processes: a benchmark stopped by SIGTERM (a `kill`, a CI timeout)
stops what it started, as it does when it ends normally or on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.processes import process_tree

REPO_ROOT = Path(__file__).resolve().parents[2]
# The Kafka benchmarks are the checkout's (benchmarks/), run from its root.
BENCHMARKS = [sys.executable, "-m", "benchmarks"]


def children(pid: int) -> list[int]:
    return process_tree(pid)[1:]


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_soak_stopped_by_sigterm_stops_its_service(kafka_bootstrap: str, tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        "".join(
            json.dumps(
                {"id": f"a{i}", "title": f"Story {i}", "content": f"Body of story {i}. " * 20}
            )
            + "\n"
            for i in range(50)
        )
    )
    bench = subprocess.Popen(
        [
            *BENCHMARKS,
            *("soak", "--data", str(feed), "--minutes", "10", "--rate", "20"),
            *("--bootstrap-servers", kafka_bootstrap, "--workers", "1"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=REPO_ROOT,
    )
    try:
        deadline = time.monotonic() + 120
        while not children(bench.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        started = children(bench.pid)
        assert started, "the soak never started its service"
        time.sleep(3)
        bench.send_signal(signal.SIGTERM)
        _, err = bench.communicate(timeout=90)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 130, err.decode(errors="replace")[-2000:]
    assert not [pid for pid in started if alive(pid)]
