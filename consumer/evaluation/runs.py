"""What every evaluated system produces: one decision per feed article, and the time it took."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    UNIQUE = "unique"
    DUPLICATE = "duplicate"
    NEAR_DUPLICATE = "near_duplicate"


@dataclass(frozen=True, slots=True)
class Decision:
    id: str
    verdict: Verdict
    matched_id: str | None = None

    @property
    def flagged(self) -> bool:
        return self.verdict is not Verdict.UNIQUE


@dataclass(frozen=True, slots=True)
class Run:
    """A system's decisions in feed order; `error` says why a system produced none."""

    system: str
    decisions: tuple[Decision, ...]
    seconds: float
    error: str | None = None
