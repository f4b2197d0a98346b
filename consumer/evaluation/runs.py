"""What every evaluated system produces: one decision per feed article, and the time it took."""

from __future__ import annotations

from dataclasses import dataclass, field

from consumer.records import DecisionKind


@dataclass(frozen=True, slots=True)
class SystemAnswer:
    id: str
    verdict: DecisionKind
    matched_id: str | None = None
    # The cluster newsdedup put the article in; None where a system names none (the
    # baselines). Not compared: two answers are the same when verdict and match are, though
    # the service, reading partitions in another order, may name a cluster by another article.
    cluster_id: str | None = field(default=None, compare=False)

    @property
    def flagged(self) -> bool:
        return self.verdict is not DecisionKind.UNIQUE


@dataclass(frozen=True, slots=True)
class SystemRun:
    """A system's decisions in feed order; `error` says why a system produced none.

    `seconds` is wall-clock time; `cpu_seconds` the CPU time it used (its own processes'
    user + system), which a busy machine does not inflate; None where it cannot be measured."""

    system: str
    decisions: tuple[SystemAnswer, ...]
    seconds: float
    error: str | None = None
    cpu_seconds: float | None = None
