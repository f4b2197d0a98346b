"""The derived-table cache: hits equal rebuilds, a changed source is never answered from a
stale entry, and a damaged or unwritable cache costs only a rebuild."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from consumer.errors import InputError
from consumer.fingerprint import idf, tablecache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "newsdedup" / "tables"


class Builder:
    def __init__(self, value: int) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> dict[str, np.ndarray]:
        self.calls += 1
        return {"a": np.arange(self.value), "b": np.array(float(self.value))}


def test_an_entry_is_built_once_then_read(cache: Path) -> None:
    build = Builder(5)
    first = tablecache.cached("t", b"source-1", ("a", "b"), build)
    second = tablecache.cached("t", b"source-1", ("a", "b"), build)
    assert build.calls == 1
    assert np.array_equal(first["a"], second["a"]) and float(second["b"]) == 5.0
    assert len(list(cache.glob("t-*.npz"))) == 1


def test_a_changed_source_is_rebuilt(cache: Path) -> None:
    tablecache.cached("t", b"source-1", ("a", "b"), Builder(5))
    changed = Builder(7)
    got = tablecache.cached("t", b"source-2", ("a", "b"), changed)
    assert changed.calls == 1 and float(got["b"]) == 7.0


@pytest.mark.parametrize("damage", [b"", b"not a zip file", b"PK\x03\x04truncated"])
def test_a_damaged_entry_is_rebuilt_and_replaced(
    cache: Path, damage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    tablecache.cached("t", b"s", ("a", "b"), Builder(5))
    (entry,) = cache.glob("t-*.npz")
    entry.write_bytes(damage)
    build = Builder(5)
    with caplog.at_level(logging.WARNING, logger="consumer.fingerprint.tablecache"):
        got = tablecache.cached("t", b"s", ("a", "b"), build)
    assert build.calls == 1 and np.array_equal(got["a"], np.arange(5))
    assert "rebuilding it" in caplog.text
    assert tablecache.cached("t", b"s", ("a", "b"), build) and build.calls == 1


def test_an_entry_with_other_arrays_is_rebuilt(cache: Path) -> None:
    tablecache.cached("t", b"s", ("a", "b"), Builder(5))
    build = Builder(5)
    got = tablecache.cached("t", b"s", ("a", "b", "c"), lambda: {**build(), "c": np.zeros(1)})
    assert build.calls == 1 and set(got) == {"a", "b", "c"}


def test_an_unwritable_cache_still_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    build = Builder(3)
    assert np.array_equal(tablecache.cached("t", b"s", ("a", "b"), build)["a"], np.arange(3))
    tablecache.cached("t", b"s", ("a", "b"), build)
    assert build.calls == 2
    assert os.listdir(tmp_path) == ["a-file"]


def test_an_idf_file_changed_in_place_is_read_again(cache: Path, tmp_path: Path) -> None:
    table = tmp_path / "idf.txt"
    table.write_text("新闻 5.0\n香港 7.5\n经济 2.0\n", encoding="utf-8")
    idf.load_idf.cache_clear()
    try:
        before = idf.load_idf(str(table))
        table.write_text("新闻 5.0\n香港 9.5\n经济 2.0\n", encoding="utf-8")
        idf.load_idf.cache_clear()
        after = idf.load_idf(str(table))
        table.write_text("新闻 5.0\n香港 oops\n", encoding="utf-8")
        idf.load_idf.cache_clear()
        with pytest.raises(InputError, match="香港 oops"):
            idf.load_idf(str(table))
    finally:
        idf.load_idf.cache_clear()
    assert sorted(before.values.tolist()) == [2.0, 5.0, 7.5]
    assert sorted(after.values.tolist()) == [2.0, 5.0, 9.5]
    assert len(list(cache.glob("idf-*.npz"))) == 2


def test_fingerprints_from_a_warm_cache_equal_those_from_a_cold_one(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from consumer.fingerprint.fingerprinter import Fingerprinter\n"
        "f = Fingerprinter()\n"
        "for title, text in [('港股收市', '恒生指數今日收市上升，成交額增加。'), "
        "('Oil prices', 'Crude oil futures rose 2% on Tuesday after OPEC said it would cut.')]:\n"
        "    fp = f.fingerprint(title, text)\n"
        "    print(fp.simhash, fp.content_hash.hex(), fp.sketch.hex())\n"
    )

    def run(cache_home: Path) -> str:
        env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    uncached = run(blocked)  # nothing can be written there: built, never read
    warm = tmp_path / "warm"
    assert run(warm) == uncached  # cold: builds and writes
    assert sorted(p.name.split("-")[0] for p in (warm / "newsdedup" / "tables").iterdir()) == [
        "char",
        "char",
        "idf",
        "unicode",
    ]
    assert run(warm) == uncached  # warm: reads
