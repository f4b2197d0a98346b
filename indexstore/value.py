"""`value_type`: the immutable records of the data path, most of them created once per article
on its way through the service (its message, fingerprint, matches, index record, decision).

Built at run time as plain slotted dataclasses that hash by value, as frozen ones do. A frozen
dataclass's `__init__` sets each field through `object.__setattr__` (its own `__setattr__`
refuses), at ~0.15 µs a field against ~0.03 µs for a plain store; an article creates about a
dozen of these records with ~90 fields between them, which cost `check` a tenth of its CPU
time on short articles (Reuters), measured side by side.

They stay immutable where it is checked: the type checker sees them frozen (`mypy --strict`
refuses an assignment to a field in the modules it checks), and with FREEZE_NEWSDEDUP_RECORDS=1,
which the test suite sets for itself and every process it starts, they are built frozen, so
a test that reaches code assigning a field fails there. (The variable stays outside the
NEWSDEDUP_ prefix, which belongs to the configuration and refuses names it does not know.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

T = TypeVar("T")

# Read once, when the modules defining the records are imported.
FROZEN_AT_RUN_TIME = os.environ.get("FREEZE_NEWSDEDUP_RECORDS") == "1"


@dataclass_transform(frozen_default=True)
def value_type(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True, slots=True)`, without the cost of frozen at construction
    unless FREEZE_NEWSDEDUP_RECORDS=1."""
    if FROZEN_AT_RUN_TIME:
        return dataclass(frozen=True, slots=True)(cls)
    return dataclass(slots=True, unsafe_hash=True)(cls)
