"""`value_type` records behave as frozen dataclasses do, built frozen or not: equal and
hashing by value, slotted, picklable (workers send them between processes) and copied by
`dataclasses.replace`; immutable to the type checker, and at run time in the tests."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexstore.model import Match
from indexstore.value import FROZEN_AT_RUN_TIME

# Run in a process of its own: built as the service builds the records, and as the tests do.
BEHAVIOUR = """
import dataclasses, json, pickle
from indexstore.model import Match
from indexstore.value import value_type

@value_type
class Point:
    x: int
    label: str = "p"

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
print(json.dumps(Point.__dataclass_params__.frozen))
"""


def test_records_behave_like_frozen_dataclasses_in_the_service_and_in_the_tests() -> None:
    production = {k: v for k, v in os.environ.items() if k != "FREEZE_NEWSDEDUP_RECORDS"}
    for env, frozen in (
        (production, False),
        ({**production, "FREEZE_NEWSDEDUP_RECORDS": "1"}, True),
    ):
        out = subprocess.run(
            [sys.executable, "-c", BEHAVIOUR],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        assert json.loads(out) is frozen


def test_assigning_a_field_fails_in_the_tests() -> None:
    assert FROZEN_AT_RUN_TIME  # tests/conftest.py
    match = Match("a", 3, False, 1_000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        match.distance = 0  # type: ignore[misc]


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
