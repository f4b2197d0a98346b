"""`newsdedup bench index` on a small index: exact, and its disk and memory split add up."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from consumer.bench import index as bench_index
from indexstore import IndexOptions, IndexStore, SearchResult


def _args(tmp_path: Path, **overrides: object) -> argparse.Namespace:
    # Through the command's own parser, so its defaults are what a user gets.
    parser = argparse.ArgumentParser()
    bench_index.register(parser.add_subparsers())
    values: dict[str, object] = {
        "n": 3000,
        "k": 3,
        "ops": 400,
        "batch": 100,
        "verify": 50,
        "dir": str(tmp_path / "ix"),
    }
    values.update(overrides)
    argv = ["index", "--json"]
    for name, value in values.items():
        if value is not None:  # None: the command's default
            argv += [f"--{name.replace('_', '-')}", str(value)]
    return parser.parse_args(argv)


def _run(capsys: pytest.CaptureFixture[str], args: argparse.Namespace) -> dict[str, Any]:
    assert bench_index.run(args) == 0
    got: dict[str, Any] = json.loads(capsys.readouterr().out)
    return got


def test_the_disk_split_covers_the_directory_and_the_search_is_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _run(capsys, _args(tmp_path))
    assert got["mismatches"] == 0 and got["verified"] == 50
    assert got["planted_found"] == got["planted"] > 0
    parts = ("disk_rows_per_article", "disk_tables_per_article", "disk_records_per_article")
    assert all(got[p] > 0 for p in parts)
    # Rows, saved tables and records are most of the directory; the rest is RocksDB's
    # logs, manifest and options files, which a small index makes large in proportion.
    assert sum(got[p] for p in parts) <= got["bytes_per_article"]
    assert got["disk_tables_per_article"] * 3400 == pytest.approx(
        (tmp_path / "ix" / "search-tables.npz").stat().st_size, rel=0.01
    )
    assert 0 < got["search_tables_mib"] < got["peak_rss_mib"]
    assert got["bench_arrays_mib"] == pytest.approx(3400 * 8 / 2**20)


def test_the_brute_force_scans_in_chunks_and_finds_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench_index, "BRUTE_FORCE_CHUNK", 7)
    got = _run(capsys, _args(tmp_path, n=500, ops=100, verify=20, dir=None))
    assert got["mismatches"] == 0 and got["verified"] == 20


def test_a_wrong_match_is_a_mismatch() -> None:
    fps = np.array([0b1011, 0b0000, 0b1111], dtype=np.uint64)
    times = bench_index._EventTimes(2, 3 * bench_index.HOUR_MS)
    retention = 72 * bench_index.HOUR_MS
    none = SearchResult((), bench_index.START_MS, late=False, clamped=False)
    assert bench_index._differs(none, fps, times, 2, 1, retention)  # a0 is 1 bit away
    assert not bench_index._differs(none, fps, times, 2, 0, retention)


def test_disk_usage_counts_rows_and_records_apart(tmp_path: Path) -> None:
    options = IndexOptions(max_distance=3, retention_ms=72 * bench_index.HOUR_MS)
    clock = bench_index.START_MS + bench_index.HOUR_MS
    with IndexStore.open(tmp_path / "ix", options, clock=lambda: clock) as store:
        assert store.disk_usage() == {"rows": 0, "records": 0}
        batch = store.begin()
        for i in range(100):
            batch.put(bench_index._record(i, i * 0x9E3779B97F4A7C15 % 2**64, bench_index.START_MS))
        batch.commit()
    with IndexStore.open(tmp_path / "ix", options, clock=lambda: clock) as store:
        usage = store.disk_usage()
    assert usage["rows"] > 0 and usage["records"] > 0
