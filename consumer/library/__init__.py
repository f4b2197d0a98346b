"""newsdedup as a library: the deduplicator of `newsdedup check` and the service, in your process.

    from newsdedup import Deduplicator

    with Deduplicator("/var/lib/app/dedup") as dedup:
        decision = dedup.decide({"id": "a", "title": "…", "content": "…",
                                 "published_at": "2024-05-01T08:00:00Z"})
        decision.decision, decision.cluster_id, decision.matched_id, decision.distance
        decisions = dedup.decide_many(articles)  # the batch path: one index write

It is a thin face over the same core as `check`: the articles go through the service's parser,
fingerprinting, event-time order (one partition, in the order handed over) and match rules
into an on-disk index that forgets articles older than its window. The same articles in the
same order give the same decisions as `newsdedup check` on a file of them.

This module is installed as `newsdedup`; in a checkout it lives in consumer/library/.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from consumer.config import FingerprintConfig, IndexConfig, MatchConfig, load_config
from consumer.deciding.rules import match_rules
from consumer.errors import NewsdedupError
from consumer.records import Analyzed, Decision, DecisionKind, Invalid, Message, Source
from consumer.stream.eventtime import Timed, wall_clock_ms
from consumer.stream.pipeline import Pipeline
from consumer.stream.sequence import SequenceDecider
from consumer.stream.state import open_index
from consumer.stream.workers import Analyzer, fingerprint_options

__all__ = [
    "Decision",
    "DecisionKind",
    "Decisions",
    "Deduplicator",
    "Explanation",
    "InvalidArticle",
]

# The sections whose options a Deduplicator takes as keywords, as the service's TOML has them.
_OPTION_NAMES = {
    section: {f.name for f in dataclasses.fields(cls)}
    for section, cls in (
        ("fingerprint", FingerprintConfig),
        ("index", IndexConfig),
        ("match", MatchConfig),
    )
}
# CPU seconds of fingerprinting in the caller's process before worker processes start (as in
# `check`): a few thousand articles cost least without them.
_INLINE_FINGERPRINT_S = 4.0
# What the decisions' `source` names: the library's one sequence.
_TOPIC = "library"


class InvalidArticle(NewsdedupError, ValueError):
    """An article that cannot be decided; `field` names the field at fault (None when the
    article itself is not a JSON object), `reason` is the dead-letter reason of the service."""

    def __init__(self, index: int, reason: str, detail: str, field: str | None) -> None:
        super().__init__(f"article {index}: {detail}")
        self.index = index  # its place in the call's articles
        self.reason = reason
        self.field = field


class Decisions(list[Decision]):
    """The decisions of one `decide_many` call, one per article in the order given, and the
    `corrections` they made: decisions made again for articles decided before, which an
    earlier-published article turned out to be the original of."""

    def __init__(self, decisions: Iterable[Decision], corrections: Iterable[Decision]) -> None:
        super().__init__(decisions)
        self.corrections = list(corrections)


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why an article would be decided as it would be now (nothing is stored)."""

    decision: Decision
    terms: tuple[tuple[str, float], ...]  # the fingerprint's heaviest terms and weights
    reason: str

    def __str__(self) -> str:
        d = self.decision
        lines = [
            f"{d.id}: {d.decision.value} (cluster {d.cluster_id})",
            f"  why: {self.reason}",
            f"  simhash: {d.simhash:016x}",
            "  heaviest terms: " + ", ".join(f"{t} {w:.2f}" for t, w in self.terms[:12]),
        ]
        return "\n".join(lines)


class Deduplicator:
    """Near-duplicate decisions for articles, against everything decided before them that is
    still in the window, in an index directory that persists across runs.

    `path` is the index directory (created if missing). `options` are those of the service's
    `[fingerprint]`, `[index]` and `[match]` sections, with the same names, values and
    defaults (e.g. `retention="72h"`, `max_distance=12`, `min_jaccard=0.5`); `config` reads
    them from a TOML file first. `workers` fingerprinting processes start once the articles
    handed over have taken 4 CPU-seconds in this process (0: one per core; None: never).
    `on_correction` is called with every correction, whichever call made it: a decision made
    again for an article decided before, once an earlier-published original of it arrives
    (a store that keeps the latest decision per article id stays right by applying them).

    Threads: one `Deduplicator` per index directory (a second one, in this process or another,
    is refused: the index is locked while open). Its methods may be called from any thread;
    calls are serialized, so decisions are made one call at a time, in the order the calls
    take the lock. Readers: `newsdedup index stats` and `index get --state DIR` open the
    directory read-only while it is in use, and see what the calls returned so far had
    written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        config: str | os.PathLike[str] | None = None,
        workers: int | None = 0,
        on_correction: Callable[[Decision], None] | None = None,
        **options: Any,
    ) -> None:
        self._config = load_config(config, environ={}, overrides=_sections_of(options))
        self._lock = threading.Lock()
        self._stack = ExitStack()
        try:
            self._analyzer = self._stack.enter_context(
                Analyzer(
                    self._config.input,
                    self._config.fingerprint,
                    workers,
                    pool_after_s=_INLINE_FINGERPRINT_S,
                )
            )
            self._store = self._stack.enter_context(open_index(self._config.index, os.fspath(path)))
        except BaseException:
            self._stack.close()
            raise
        self._pipeline = Pipeline(
            self._store, self._analyzer, rules=match_rules(self._config.match)
        )
        self._sequence = SequenceDecider(self._pipeline, self._config.service.reorder_window)
        self._on_correction = on_correction
        self._next_offset = 0
        self._closed = False

    # -- deciding -----------------------------------------------------------------------------

    def decide(self, article: Mapping[str, Any]) -> Decision:
        """The decision for one article (the corrections it makes go to `on_correction`)."""
        return self.decide_many([article])[0]

    def decide_many(self, articles: Iterable[Mapping[str, Any]]) -> Decisions:
        """Decisions for `articles`, in their order; one index write for all of them. Within a
        call, articles that came behind later-dated ones are put back in publish order (as
        `check` does within its reorder window); across calls, each call's articles come after
        the last call's. Raises InvalidArticle, before deciding any, if one cannot be decided."""
        with self._lock:
            self._check_open()
            messages = [self._message(a) for a in articles]
            if not messages:
                return Decisions([], [])
            results = [r for chunk in self._pipeline.analyze(messages) for r in chunk]
            for i, result in enumerate(results):
                if isinstance(result, Invalid):
                    raise _invalid(i, result)
            decided = self._sequence.decide(messages, results, pause=True)
            if self._on_correction is not None:
                for correction in decided.corrections:
                    self._on_correction(correction)
            by_offset = {d.source.offset: d for d in decided.decisions}
            return Decisions((by_offset[m.source.offset] for m in messages), decided.corrections)

    def explain(self, article: Mapping[str, Any]) -> Explanation:
        """How `article` would be decided now, and why; nothing is stored."""
        with self._lock:
            self._check_open()
            message = self._message(article)
            (result,) = [r for chunk in self._pipeline.analyze([message]) for r in chunk]
            if isinstance(result, Invalid):
                raise _invalid(0, result)
            decided = self._pipeline.decide_ordered([Timed((message, result), None)])
            decided.index_batch.abort()
            (decision,) = decided.decisions
            fingerprint = _explainer(self._config).fingerprint(
                str(article.get(self._config.input.title_field) or ""),
                str(article.get(self._config.input.content_field) or ""),
                explain=True,
            )
            return Explanation(decision, fingerprint.terms, _reason(decision, result))

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the index (and stop the worker processes); the decisions made are kept."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._stack.close()

    def __enter__(self) -> Deduplicator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise NewsdedupError("this Deduplicator is closed")

    def _message(self, article: Mapping[str, Any]) -> Message:
        """An article as the service reads it from the feed, numbered in the sequence."""
        offset = self._next_offset
        self._next_offset += 1
        try:
            value = json.dumps(dict(article), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise InvalidArticle(offset, "not_json", f"not JSON-serializable: {e}", None) from e
        return Message(None, value, Source(_TOPIC, 0, offset), wall_clock_ms())


def _sections_of(options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Keyword options by the section they belong to; an unknown one is refused by name."""
    sections: dict[str, dict[str, Any]] = {}
    for name, value in options.items():
        owner = next((s for s, names in _OPTION_NAMES.items() if name in names), None)
        if owner is None:
            known = sorted(f for names in _OPTION_NAMES.values() for f in names)
            raise TypeError(f"unknown option {name!r}; options are: {', '.join(known)}")
        sections.setdefault(owner, {})[name] = value
    return sections


def _invalid(index: int, invalid: Invalid) -> InvalidArticle:
    named = re.search(r"'([^']*)'", invalid.detail)
    return InvalidArticle(index, str(invalid.reason), invalid.detail, named and named.group(1))


_explainers: dict[Any, Any] = {}


def _explainer(config: Any) -> Any:
    """The Python fingerprinter (the native kernel's reference), which can list the terms."""
    from consumer.fingerprint.fingerprinter import Fingerprinter

    options = fingerprint_options(config.fingerprint)
    if options not in _explainers:
        _explainers[options] = Fingerprinter(options)
    return _explainers[options]


def _reason(decision: Decision, analyzed: Analyzed) -> str:
    if decision.late:
        return "older than the window behind the newest article decided: checked, not indexed"
    if decision.decision is DecisionKind.DUPLICATE:
        return f"the same normalized text as {decision.matched_id}"
    if decision.decision is DecisionKind.NEAR_DUPLICATE:
        return (
            f"fingerprint {decision.distance} bits from {decision.matched_id}'s, and their "
            "shingles agree"
        )
    return "no earlier article in the window has this text"
