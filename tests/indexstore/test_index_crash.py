"""SIGKILL a writer process many times mid-stream: every reopen shows whole batches only."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexstore import IndexOptions, IndexStore

ARTICLES_PER_BATCH = 50
MINUTE = 60_000
OPTIONS = IndexOptions(
    segment_ms=10 * MINUTE,
    retention_ms=10_000 * MINUTE,
    expected_articles=100_000,
    memory_bytes=8 << 20,
)

# The writer: batch i puts ARTICLES_PER_BATCH new articles, updates the first article of
# batch i - 1 and records position i + 1, then prints "ack i". It resumes where the index
# says it stopped.
WRITER = """
import sys
from indexstore import IndexStore
sys.path.insert(0, sys.argv[2])
from test_index_crash import ARTICLES_PER_BATCH, OPTIONS, article
store = IndexStore.open(sys.argv[1], OPTIONS, clock=lambda: 10**13)
i = store.positions().get("feed/0", 0)
while True:
    batch = store.begin()
    for j in range(ARTICLES_PER_BATCH):
        batch.put(article(i, j))
    if i:
        batch.put(article(i - 1, 0, updated=True))
    batch.set_position("feed/0", i + 1)
    batch.commit()
    print("ack", i, flush=True)
    i += 1
"""


def fingerprint(i: int, j: int, updated: bool) -> int:
    return random.Random(f"{i}/{j}/{updated}").getrandbits(64)


def article(i: int, j: int, updated: bool = False):  # -> ArticleRecord
    from indexstore import ArticleRecord

    return ArticleRecord(
        article_id=f"b{i}-{j}",
        simhash=fingerprint(i, j, updated),
        content_hash=bytes([updated]) * 16,
        event_time_ms=10**12 + i * MINUTE,
        payload=b"updated" if updated else b"",
    )


def check_whole(path: Path, acked: int) -> int:
    """Reopen and check that exactly batches 0..n-1 are there, n >= acked + 1; return n."""
    with IndexStore.open(path, OPTIONS, clock=lambda: 10**13) as store:
        n = store.positions().get("feed/0", 0)
        assert n >= acked + 1, f"batch {acked} was acknowledged but position is {n}"
        assert n <= acked + 2, f"position {n} is beyond the one batch in flight"
        assert store.get(f"b{n}-0") is None and store.get(f"b{n}-1") is None
        for i in range(n):
            updated = i < n - 1
            assert store.get(f"b{i}-0") == article(i, 0, updated)
            assert store.get(f"b{i}-{ARTICLES_PER_BATCH - 1}") == article(i, ARTICLES_PER_BATCH - 1)
        batch = store.begin()
        for i in range(max(0, n - 5), n):
            for j in (0, 1, ARTICLES_PER_BATCH - 1):
                updated = j == 0 and i < n - 1
                found = batch.search(fingerprint(i, j, updated), bytes([updated]) * 16, 0)
                assert [m.article_id for m in found.matches] == [f"b{i}-{j}"]
            if i < n - 1:
                stale = batch.search(fingerprint(i, 0, False), b"\0" * 16, 0)
                assert stale.matches == ()
        batch.abort()
        assert store.watermark_ms() == (10**12 + (n - 1) * MINUTE if n else None)
        return n


def _ack(line: str, acked: int) -> int:
    """The batch an "ack N" line acknowledges; a line the kill cut short acknowledges nothing
    new (the writer prints after committing, so ignoring it only under-claims)."""
    words = line.split()
    if line.endswith("\n") and len(words) == 2 and words[0] == "ack" and words[1].isdigit():
        return int(words[1])
    return acked


@pytest.mark.slow
def test_sigkill_mid_stream_never_splits_a_batch(tmp_path: Path) -> None:
    rng = random.Random(4)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    acked = -1
    for _ in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(Path(__file__).parent)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        wanted = rng.randint(1, 15)
        seen = 0
        for line in proc.stdout:
            acked = _ack(line, acked)
            seen += 1
            if seen >= wanted:
                break
        # Land the kill anywhere: inside put(), inside commit(), between batches.
        time.sleep(rng.random() * 0.01)
        proc.send_signal(signal.SIGKILL)
        # Acks the writer printed before it died are acknowledged too.
        for line in proc.stdout:
            acked = _ack(line, acked)
        proc.wait()
        assert seen, proc.stderr.read() if proc.stderr else ""
        n = check_whole(tmp_path, acked)
        acked = n - 1  # a batch committed but killed before its ack is acknowledged now
    assert acked > 20
