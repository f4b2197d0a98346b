"""An index of format 3 (the decision in fixed fields of each record) or of format 4 (records
without bands, no shingles), as earlier releases left it on disk, opens with this version:
migrated in place to format 5 when opened for writing, read as it is when opened read-only;
the decisions are the same afterwards, and a migration stopped anywhere (the process killed,
a conversion failing) loses nothing."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import rocksdict
from legacy_formats import downgrade_index, downgrade_index_to_format_4

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.deciding import stored
from indexstore import ArticleRecord, IndexFormatError, IndexOptions, IndexStore, LegacyDecision
from indexstore import migration as index_migration

NEWSDEDUP = [sys.executable, "-m", "consumer.cli"]
# A window of a century: the corpus spans years, and nothing may expire between the runs.
ENVIRONMENT = {
    "NEWSDEDUP_SERVICE_WORKERS": "1",
    "NEWSDEDUP_INDEX_RETENTION": "36500d",
    "NEWSDEDUP_INDEX_SEGMENT": "30d",
    # Verified by the sketch alone, no band candidates: the formats before 5 kept no band keys
    # or shingle hashes, so only this rule decides alike on an index that never had them and
    # one that did (with them, a copy of an article indexed before the upgrade that only
    # they would find is missed until that article leaves the window, as documented).
    "NEWSDEDUP_MATCH_BAND_CANDIDATES": "0",
    "NEWSDEDUP_MATCH_VERIFY_MARGIN": "0",
}
FIRST, ALL = 400, 600


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The index this version leaves after deciding the first articles of a real feed, and
    what it then decides of the whole feed (the first ones delivered again, then new ones).
    Each test works on a copy of the index, so the expensive part runs once."""
    root = tmp_path_factory.mktemp("migration")
    lines = [
        json.dumps(a, ensure_ascii=False) + "\n"
        for a in iter_jsonl(shared_data_dir() / "zh_hkcnews_2017_2022.jsonl.gz", ALL)
    ]
    # One name: a decision's source names the file.
    for name, count in (("first", FIRST), ("all", ALL)):
        (root / name).mkdir()
        (root / name / "feed.jsonl").write_text("".join(lines[:count]))
    check(root / "first" / "feed.jsonl", root / "state")
    reference = root / "reference"
    subprocess.run(["cp", "-r", str(root / "state"), str(reference)], check=True)
    return root, check(root / "all" / "feed.jsonl", reference)


def check(feed: Path, state: Path) -> list[str]:
    out = state.parent / f"{state.name}.out.jsonl"
    result = subprocess.run(
        [*NEWSDEDUP, "check", str(feed), "-o", str(out), "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **ENVIRONMENT},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out.read_text().splitlines()


def copy_state(written: tuple[Path, list[str]], tmp_path: Path) -> Path:
    state = tmp_path / "state"
    subprocess.run(["cp", "-r", str(written[0] / "state"), str(state)], check=True)
    return state


def records(state: Path, ids: list[str], **open_args: Any) -> dict[str, ArticleRecord | None]:
    with IndexStore.open(state, read_only=True, **open_args) as store:
        return {article_id: store.get(article_id) for article_id in ids}


def as_migrated(records: dict[str, ArticleRecord | None]) -> dict[str, ArticleRecord | None]:
    """The records as a migration leaves them: the formats before 5 held no band keys."""
    return {i: r and dataclasses.replace(r, bands=b"") for i, r in records.items()}


def as_migrated_from_format_3(
    records: dict[str, ArticleRecord | None],
) -> dict[str, ArticleRecord | None]:
    """Format 3 also held the decision in fixed fields, without the text length."""
    return {i: r and _without_text_length(r) for i, r in as_migrated(records).items()}


def _without_text_length(record: ArticleRecord) -> ArticleRecord:
    decision = stored.decode(record.article_id, record.payload)
    payload = stored.encode(record.article_id, dataclasses.replace(decision, text_chars=None))
    return dataclasses.replace(record, payload=payload)


def ids_of(decisions: list[str]) -> list[str]:
    return list(dict.fromkeys(json.loads(line)["id"] for line in decisions))


def format_of(state: Path) -> int:
    db = rocksdict.Rdict(
        str(state), rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only()
    )
    try:
        return int(json.loads(db[b"meta"])["format"])
    finally:
        db.close()


def without_processed_at(line: str) -> str:
    return re.sub(r'"processed_at":"[^"]*",', "", line)


def test_a_migrated_index_gives_the_same_decisions(
    written: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """The whole feed against the migrated index is decided as against the index that was
    never migrated: the articles delivered again byte for byte, processed_at included (it is
    stored), and the new ones but for their processed_at (now)."""
    root, expected = written
    state = copy_state(written, tmp_path)
    ids = ids_of(expected)
    before = as_migrated_from_format_3(records(state, ids))
    assert downgrade_index(state) == sum(r is not None for r in before.values()) > 0
    assert format_of(state) == 3
    # Read-only, as a tool sees an index an older version still writes: converted on read.
    assert records(state, ids, upgrade=stored.from_legacy) == before
    got = check(root / "all" / "feed.jsonl", state)
    assert format_of(state) == 5
    assert [without_processed_at(line) for line in got] == [
        without_processed_at(line) for line in expected
    ]
    again = [line for line in expected if json.loads(line)["source"]["offset"] < FIRST]
    assert again and set(again) <= set(got)
    # Re-deliveries, verified candidates, clusters, corrections: the feed exercises them all.
    kinds = {json.loads(line)["decision"] for line in expected}
    assert kinds == {"unique", "duplicate", "near_duplicate"}
    assert any('"correction":true' in line for line in expected)


def test_a_migrated_format_4_index_gives_the_same_decisions(
    written: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Format 4 (records without bands, no shingles) needs no conversion of the caller's: read
    as it is read-only, migrated by the service's first open, the feed then decided alike."""
    root, expected = written
    state = copy_state(written, tmp_path)
    ids = ids_of(expected)
    before = as_migrated(records(state, ids))
    assert downgrade_index_to_format_4(state) == sum(r is not None for r in before.values())
    assert format_of(state) == 4 and set(record_versions(state)) == {3}
    assert records(state, ids) == before
    got = check(root / "all" / "feed.jsonl", state)
    assert format_of(state) == 5 and set(record_versions(state)) == {4}
    assert [without_processed_at(line) for line in got] == [
        without_processed_at(line) for line in expected
    ]


def test_a_format_4_index_gains_empty_bands_and_no_shingles(tmp_path: Path) -> None:
    """Built by this version with bands and shingles, then turned into what format 4 held:
    read-only, records read without bands; opened for writing, migrated, nothing of the old
    records is a band match or has shingles, and new records are both."""
    hour = 3_600_000
    options = IndexOptions(segment_ms=hour, retention_ms=3 * hour, memory_bytes=8 << 20)
    now = 1_000 * hour
    bands = struct.pack("<16I", *range(16))

    def record(article_id: str, simhash: int, **new: bytes) -> ArticleRecord:
        return ArticleRecord(article_id, simhash, b"x" * 16, now - hour, b"p", b"k", **new)

    olds = [record(f"old{i}", i << 40) for i in range(30)]
    with IndexStore.open(tmp_path, options, clock=lambda: now) as store, store.begin() as batch:
        for old in olds:
            batch.put(dataclasses.replace(old, bands=bands, shingles=b"gone"))
    assert downgrade_index_to_format_4(tmp_path) == len(olds)
    assert format_of(tmp_path) == 4
    with IndexStore.open(tmp_path, options, read_only=True) as store:
        assert [store.get(old.article_id) for old in olds] == olds
    with IndexStore.open(tmp_path, options, clock=lambda: now) as store:
        assert store.migrated is not None
        assert (store.migrated.from_format, store.migrated.to_format) == (4, 5)
        assert store.migrated.records == len(olds)
        assert [store.get(old.article_id) for old in olds] == olds
        with store.begin() as batch:
            assert batch.shingles_many([old.article_id for old in olds]) == {}
            assert batch.search(1 << 40, b"x" * 16, now, bands=bands).band_matches == ()
            batch.put(record("new", 2**64 - 1, bands=bands, shingles=b"kept"))
    assert format_of(tmp_path) == 5 and record_versions(tmp_path) == {4: len(olds) + 1}
    with IndexStore.open(tmp_path, options, clock=lambda: now) as store, store.begin() as batch:
        found = batch.search(1 << 40, b"x" * 16, now, bands=bands)
        assert [m.article_id for m in found.matches] == ["old1"]
        assert [(m.article_id, m.shared_bands) for m in found.band_matches] == [("new", 16)]
        assert batch.shingles("new") == b"kept"


def test_the_migration_is_logged_once(written: tuple[Path, list[str]], tmp_path: Path) -> None:
    state = copy_state(written, tmp_path)
    downgrade_index(state)
    logs = []
    for _ in range(2):
        result = subprocess.run(
            [*NEWSDEDUP, "index", "expire", "--state", str(state), "--before", "0"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        logs.append(result.stderr)
    assert logs[0].count("migrated the index from format 3 to 5") == 1, logs[0]
    assert "migrated" not in logs[1]


def test_a_migration_killed_midway_continues_at_the_next_open(
    written: tuple[Path, list[str]], tmp_path: Path
) -> None:
    state = copy_state(written, tmp_path)
    ids = [a for a, r in records(state, ids_of(written[1])).items() if r is not None]
    before = as_migrated_from_format_3(records(state, ids))
    downgrade_index(state)
    # The process dies (no close, no cleanup) after three chunks are written.
    script = textwrap.dedent(
        f"""
        import os
        from consumer.deciding import stored
        from indexstore import IndexStore, migration
        migration.CHUNK_RECORDS = 100
        path = {str(state)!r}
        done = 0
        def upgrade(legacy):
            global done
            done += 1
            if done > 350:
                os._exit(9)
            return stored.from_legacy(legacy)
        IndexStore.open(path, IndexStore.stored_options(path), upgrade=upgrade)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], timeout=120, check=False)
    assert result.returncode == 9
    assert format_of(state) == 3
    versions = record_versions(state)
    assert versions == {2: len(ids) - 300, 4: 300}
    with IndexStore.open(
        state, IndexStore.stored_options(state), upgrade=stored.from_legacy
    ) as store:
        assert store.migrated is not None and store.migrated.records == len(ids) - 300
    assert format_of(state) == 5
    assert records(state, ids) == before


def test_a_failing_conversion_stops_the_migration_and_loses_nothing(
    written: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = copy_state(written, tmp_path)
    ids = [a for a, r in records(state, ids_of(written[1])).items() if r is not None]
    before = as_migrated_from_format_3(records(state, ids))
    downgrade_index(state)
    monkeypatch.setattr(index_migration, "CHUNK_RECORDS", 64)
    converted = 0

    def failing(legacy: LegacyDecision) -> bytes:
        nonlocal converted
        converted += 1
        if converted == 200:
            raise RuntimeError("injected")
        return stored.from_legacy(legacy)

    with pytest.raises(RuntimeError, match="injected"):
        IndexStore.open(state, IndexStore.stored_options(state), upgrade=failing)
    assert format_of(state) == 3 and record_versions(state)[4] == 192
    with IndexStore.open(
        state, IndexStore.stored_options(state), upgrade=stored.from_legacy
    ) as store:
        assert store.migrated is not None and store.migrated.records == len(ids) - 192
    assert records(state, ids) == before


def test_a_format_3_index_is_not_written_without_its_conversion(
    written: tuple[Path, list[str]], tmp_path: Path
) -> None:
    state = copy_state(written, tmp_path)
    downgrade_index(state)
    with pytest.raises(IndexFormatError, match="format 3"):
        IndexStore.open(state, IndexStore.stored_options(state))
    assert format_of(state) == 3


def record_versions(state: Path) -> dict[int, int]:
    names = rocksdict.Rdict.list_cf(str(state))
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(
        str(state),
        opts,
        column_families={n: opts for n in names if n != "default"},
        access_type=rocksdict.AccessType.read_only(),
    )
    counts: dict[int, int] = {}
    try:
        for name in names:
            if name.startswith("articles."):
                cf = db.get_column_family(name)
                for value in cf.values():
                    counts[value[0]] = counts.get(value[0], 0) + 1
                del cf
    finally:
        db.close()
    return counts
