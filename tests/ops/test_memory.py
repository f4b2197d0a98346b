"""Freed memory goes back to the OS: what a flushed memtable leaves in glibc's heap."""

from __future__ import annotations

import subprocess
import sys

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
