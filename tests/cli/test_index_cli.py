"""`newsdedup index stats|get|expire` on a real index directory, and `bench index` in small."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from legacy_formats import downgrade_to_format_4

from consumer.cli import main
from consumer.deciding import stored
from consumer.deciding.stored import StoredDecision
from consumer.records import DecisionKind
from consumer.timetext import format_time_ms
from indexstore import ArticleRecord, IndexOptions, IndexStore

HOUR = 3_600_000
T0 = 1_800_000_000_000 - 1_800_000_000_000 % HOUR
DECIDED = StoredDecision(DecisionKind.NEAR_DUPLICATE, "a0", "a1", 3, True, T0 + 5, ("b", "c"))


@pytest.fixture
def state(tmp_path: Path) -> Path:
    options = IndexOptions(max_distance=4, memory_bytes=8 << 20)
    with (
        IndexStore.open(tmp_path, options, clock=lambda: T0 + 100 * HOUR) as store,
        store.begin() as batch,
    ):
        for h in range(3):
            batch.put(
                ArticleRecord(
                    f"a{h}",
                    0xABC << h,
                    b"\1" * 16,
                    T0 + h * HOUR,
                    # The service's payload for one, a payload of other code for the rest.
                    stored.encode(f"a{h}", DECIDED) if h == 2 else b"src",
                )
            )
    return tmp_path


def test_stats(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", "stats", "--state", str(state), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["max_distance"] == 4 and doc["articles"] == 3
    assert [s["start_ms"] for s in doc["segments"]] == [T0, T0 + HOUR, T0 + 2 * HOUR]
    assert main(["index", "stats", "--state", str(state)]) == 0
    out = capsys.readouterr().out
    assert "k=4" in out and "3 articles in 3 segments" in out


def test_get(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", "get", "a1", "--state", str(state)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simhash"] == f"{0xABC << 1:016x}" and doc["payload"] == b"src".hex()
    assert doc["sketch"] == "" and "processed_at" not in doc and "decision" not in doc
    assert main(["index", "get", "a2", "--state", str(state)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "article_id": "a2",
        "simhash": f"{0xABC << 2:016x}",
        "content_hash": "01" * 16,
        "event_time_ms": T0 + 2 * HOUR,
        "cluster_id": "a0",
        "decision": "near_duplicate",
        "matched_id": "a1",
        "distance": 3,
        "late": True,
        "payload": stored.encode("a2", DECIDED).hex(),
        "sketch": "",
        "event_time": format_time_ms(T0 + 2 * HOUR),
        "processed_at": format_time_ms(T0 + 5),
        "corrected": ["b", "c"],
    }
    assert main(["index", "get", "nope", "--state", str(state)]) == 2
    assert capsys.readouterr().err == f"newsdedup: error: no article 'nope' in {state}\n"


def test_expire(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = str(T0 + 2 * HOUR)
    assert main(["index", "expire", "--state", str(state), "--before", before]) == 0
    assert "dropped 2 segments" in capsys.readouterr().out
    with IndexStore.open(state, read_only=True) as store:
        assert [s.start_ms for s in store.stats().segments] == [T0 + 2 * HOUR]


def test_not_an_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", "stats", "--state", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("newsdedup: error: no index in") and err.count("\n") == 1


def damage(directory: Path) -> None:
    (directory / "CURRENT").write_text("damaged\n")


@pytest.mark.parametrize(
    ("spoil", "what", "aside"),
    [(damage, "is damaged", "damaged"), (downgrade_to_format_4, "is of format 4", "old")],
    ids=["damaged", "older-format"],
)
def test_an_unusable_index_names_the_recovery_of_its_role(
    spoil: Callable[[Path], object],
    what: str,
    aside: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Damaged or of an older format, an index is refused in one line with its rebuild: the
    single-process index is rebuilt from the feed; a decide role's domain index by moving its
    whole partition aside, which the owner then restores from the changelog."""
    domain = tmp_path / "decide" / "partition-4" / "domain=news"
    for directory, recovery in (
        (tmp_path / "all", f"newsdedup index rebuild --from-feed --state {tmp_path / 'all'}"),
        (domain, f"mv {domain.parent} {domain.parent}.{aside}"),
    ):
        directory.mkdir(parents=True)
        with IndexStore.open(directory, IndexOptions(memory_bytes=8 << 20)):
            pass
        spoil(directory)
        assert main(["index", "stats", "--state", str(directory)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"newsdedup: error: the index in {directory} {what}")
        assert recovery in err and err.count("\n") == 1


def test_rebuild_from_the_feed_never_writes_into_an_existing_index(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", "rebuild", "--from-feed", "--state", str(state)]) == 2
    err = capsys.readouterr().err
    assert f"{state} is not empty: rebuild into an empty directory" in err
    assert f"mv {state} {state}.damaged" in err and err.count("\n") == 1
    assert main(["index", "rebuild", "--from-feed", "--partition", "0"]) == 2
    assert "not with --from-feed" in capsys.readouterr().err


@pytest.mark.parametrize(("k", "hours"), [(3, 72), (10, 300)])
def test_bench_index_is_exact(k: int, hours: int, capsys: pytest.CaptureFixture[str]) -> None:
    # Small, but through the real store: planted neighbours found, brute force agrees, and a
    # replay longer than the window creates and expires segments on the way.
    argv = ["bench", "index", "--n", "3000", "--ops", "300", "--k", str(k), "--json"]
    assert main([*argv, "--hours", str(hours), "--verify", "60"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mismatches"] == 0 and doc["verified"] == 60
    assert doc["planted"] > 0 and doc["planted_found"] == doc["planted"]
    # Reopened in a process of its own, as after a restart, which then drops a segment.
    assert doc["reopen_seconds"] > 0 and 0 < doc["reopen_peak_rss_mib"] < 1024
    assert doc["drop_segment_articles"] > 0
