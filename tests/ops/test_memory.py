"""Freed memory goes back to the OS: what a flushed memtable leaves in glibc's heap."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from consumer.ops.memory import YOUNG_COLLECTION_THRESHOLD

PROBE = """
import ctypes
from consumer.ops.memory import release_free_memory

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
# 200 MiB in 4 KiB blocks (below the mmap threshold, so in the heap), then all freed but the
# last, which pins the heap's top: free() alone gives nothing back.
blocks = [libc.malloc(4096) for _ in range(51_200)]
for b in blocks:
    ctypes.memset(b, 1, 4096)
for b in blocks[:-1]:
    libc.free(b)
before = rss_mib()
assert release_free_memory()
print(before, rss_mib())
"""


def test_freed_heap_memory_leaves_the_resident_set() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    before, after = (float(x) for x in out.split())
    assert before - after > 150, (before, after)


THRESHOLDS = """
import gc, json, sys
from consumer import cli
from consumer.config import load_config
from consumer.stream.workers import Analyzer

default = gc.get_threshold()
assert cli.main(["check", sys.argv[1], "-o", sys.argv[2], "--state", sys.argv[3]]) == 0
in_cli = gc.get_threshold()
config = load_config(None)
with Analyzer(config.input, config.fingerprint, workers=1) as analyzer:
    in_worker = analyzer._pool.apply(gc.get_threshold)
print(json.dumps([default, in_cli, in_worker]))
"""


def test_cycles_are_collected_less_often_by_the_command_and_by_every_worker(
    tmp_path: Path,
) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text('{"id": "a", "title": "t", "content": "some words of news"}\n')
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            THRESHOLDS,
            str(feed),
            str(tmp_path / "out.jsonl"),
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    default, in_cli, in_worker = json.loads(out)
    assert default[0] == 700
    assert in_cli == in_worker == [YOUNG_COLLECTION_THRESHOLD, default[1], default[2]]


THREADS = """
import os
import consumer.cli  # imports NumPy, and with it OpenBLAS
print(os.environ["OPENBLAS_NUM_THREADS"], len(os.listdir("/proc/self/task")))
"""


def test_numpy_starts_no_spinning_blas_threads_unless_the_operator_asks() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    run = functools.partial(
        subprocess.run, [sys.executable, "-c", THREADS], capture_output=True, text=True
    )
    assert run(env=env, check=True).stdout.split() == ["1", "1"]
    asked = run(env={**env, "OPENBLAS_NUM_THREADS": "2"}, check=True).stdout.split()
    assert asked[0] == "2"
    if (os.cpu_count() or 1) > 1:
        assert int(asked[1]) > 1  # OpenBLAS's own thread runs: the count above means something
