"""What the Kafka benchmarks share beside the harness (consumer/harness/): the feed's lines,
and the CPU and memory of a service's process tree read from /proc."""

from __future__ import annotations

import json
import os
from pathlib import Path

from consumer.corpus import open_bytes


def load_feed(path: str, n: int) -> list[bytes]:
    """The first `n` lines that the service will decide (an id and some text), so every run
    knows how many decisions to wait for."""
    values = []
    with open_bytes(path) as f:
        for line in f:
            try:
                article = json.loads(line)
            except ValueError:
                continue
            if article.get("id") and (article.get("title") or article.get("content")):
                values.append(line.rstrip(b"\r\n"))
            if len(values) >= n:
                break
    return values


def process_tree(pid: int) -> list[int]:
    """`pid` and its children (one level: the worker pool). Children of every thread: the
    service starts its pool from a thread other than the main one."""
    pids = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            pids += [int(c) for c in children.read_text().split()]
        except OSError:
            continue
    return pids


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its worker processes so far."""
    ticks = 0
    for p in process_tree(pid):
        try:
            # After the command's closing parenthesis: fields 3 on; utime, stime are 14, 15.
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_rss(pid: int) -> int:
    """RSS in bytes of `pid` and its worker processes."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total
