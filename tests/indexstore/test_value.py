"""`value_type` records behave as frozen dataclasses do, but for the cost of building them:
equal and hashing by value, slotted, picklable (workers send them between processes), copied
by `dataclasses.replace`, and immutable to the type checker."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

from indexstore.model import Match
from indexstore.value import value_type


@value_type
class Point:
    x: int
    label: str = "p"


def test_records_compare_and_hash_by_value_like_frozen_dataclasses() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Frozen:
        x: int
        label: str = "p"

    assert Point(1) == Point(1, "p") != Point(2)
    assert hash(Point(1)) == hash(Point(1, "p")) == hash(Frozen(1))
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert not hasattr(Point(1), "__dict__")
    assert dataclasses.replace(Point(1), label="q") == Point(1, "q")
    assert pickle.loads(pickle.dumps(Point(3, "r"))) == Point(3, "r")
    match = Match("a", 3, False, 1_000, b"payload", b"sketch", 2)
    assert pickle.loads(pickle.dumps(match)) == match


def test_the_type_checker_rejects_assigning_a_field(tmp_path: Path) -> None:
    snippet = tmp_path / "assign.py"
    snippet.write_text(
        "from indexstore.model import Match\ndef move(m: Match) -> None:\n    m.distance = 0\n"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 1, checked.stdout
    assert 'Property "distance" defined in "Match" is read-only' in checked.stdout
