"""Decisions made again when an article arrives after copies of it published later.

Deciding in event-time order makes every copy name the earliest article it copies. When an
earlier article E arrives after later ones L were decided (a backlog produced while it is read,
disorder within a partition), the index stands as if E had been there all along, and so must
the later articles' decisions: each is decided again and published once more under its own
key, with `"correction": true`, so that a reader keeping the latest record per id ends with
what `check` answers on the feed sorted by event time.

Only two things about a decided article can change when an earlier one arrives:

- Its match. A later article L takes E as its match when E is among its candidates, ranks
  before L's current match in the order `decide` walks candidates (closest, then exact, then
  earliest) and passes verification with L as the article decided, as `check` decides L; an
  article decided unique takes E whenever E passes. Nothing else about L's candidates
  changed: only E is new.
- Its cluster, which is its match's cluster. A change of cluster travels down every article
  that names a changed one as its match — copies of copies, at any depth. Those copies lie
  near the article they matched, so a search around it finds them.

The arriving article's record names every article its arrival changed
(`StoredDecision.corrected`), so a re-delivery of it after a crash publishes those decisions
again, as they stand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from consumer.deciding import stored
from consumer.deciding.stored import StoredDecision
from consumer.records import Analyzed, Decision, DecisionKind, Source
from indexstore import ArticleRecord, Batch, Match

TakesEarlier = Callable[[ArticleRecord, StoredDecision], tuple[Match, bool] | None]
"""For a stored article and its decision: the arriving article as its candidate, if it would
now take it as its match (consumer/deciding/rules.py)."""
Near = Callable[[ArticleRecord], Sequence[Match]]
"""Every article near a stored one that may have taken it as its match."""


def settle(
    batch: Batch,
    earlier: Analyzed,
    cluster_id: str,
    later: Sequence[str],
    takes_earlier: TakesEarlier,
    copies_near: Near,
    source: Source,
    now_ms: int,
) -> list[Decision]:
    """Decide again what the arrival of `earlier` (decided into `cluster_id`, and already in
    `batch`) changes. `later` are the articles near it published after it."""
    changed: dict[str, Decision] = {}
    for article_id in later:
        record = batch.lookup(article_id)
        if record is None:
            continue
        was = stored.decode(record.article_id, record.payload)
        taken = takes_earlier(record, was)
        if taken is None:
            continue
        match, counted = taken
        now = dataclasses.replace(
            was,
            kind=DecisionKind.DUPLICATE if match.exact else DecisionKind.NEAR_DUPLICATE,
            cluster_id=cluster_id,
            matched_id=earlier.id,
            distance=match.distance,
            processed_at_ms=now_ms,
            counted=counted,
        )
        changed[record.article_id] = _rewrite(batch, record, now, source)
    # Down the chains: every copy of a changed article joins that article's cluster. Matches
    # point back in time, so the walk ends. It starts below `earlier`: copies of an article
    # not yet decided can only be of an earlier version of it, which an update leaves alone.
    pending = list(changed)
    while pending:
        parent = batch.lookup(pending.pop())
        if parent is None:
            continue
        parent_cluster = stored.cluster_of(parent.article_id, parent.payload)
        for near in copies_near(parent):
            if near.event_time_ms < parent.event_time_ms or stored.is_own_cluster(near.payload):
                continue
            was = stored.decode(near.article_id, near.payload)
            if was.matched_id != parent.article_id or was.cluster_id == parent_cluster:
                continue
            record = batch.lookup(near.article_id)
            if record is None:
                continue
            now = dataclasses.replace(was, cluster_id=parent_cluster, processed_at_ms=now_ms)
            changed[near.article_id] = _rewrite(batch, record, now, source)
            pending.append(near.article_id)
    return list(changed.values())


def again(batch: Batch, corrected: Sequence[str], source: Source) -> list[Decision]:
    """The decisions an article's arrival changed, as they stand now, for a re-delivery of it:
    the first ones may never have been published (a crash, an aborted transaction)."""
    decisions = []
    for article_id in corrected:
        current = batch.lookup(article_id)
        if current is None:
            continue
        decision = stored.decode(article_id, current.payload)
        if decision.processed_at_ms is not None:
            decisions.append(
                message(current, decision, source, decision.processed_at_ms, correction=True)
            )
    return decisions


def _rewrite(
    batch: Batch, record: ArticleRecord, decision: StoredDecision, source: Source
) -> Decision:
    # A record read back comes without its shingle hashes (kept apart, read on demand): put
    # again without them, it would lose them.
    shingles = batch.shingles(record.article_id) or b""
    payload = stored.encode(record.article_id, decision)
    batch.put(dataclasses.replace(record, payload=payload, shingles=shingles))
    assert decision.processed_at_ms is not None
    return message(record, decision, source, decision.processed_at_ms, correction=True)


def message(
    record: ArticleRecord,
    decision: StoredDecision,
    source: Source,
    processed_at_ms: int,
    correction: bool = False,
) -> Decision:
    """The decision message of a stored article."""
    return Decision(
        id=record.article_id,
        decision=decision.kind,
        cluster_id=decision.cluster_id,
        matched_id=decision.matched_id,
        distance=decision.distance,
        simhash=record.simhash,
        content_hash=record.content_hash,
        event_time_ms=record.event_time_ms,
        late=decision.late,
        source=source,
        processed_at_ms=processed_at_ms,
        correction=correction,
    )
