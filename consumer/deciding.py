"""One article's decision against the index: re-delivery, updates, clusters.

- The same id with the same content answers from the article table: the stored decision is
  emitted again (only `source` names the message being answered) and nothing is added.
- The same id with other content is an update: it is searched without itself, then replaces
  its old entry.
- Otherwise the closest earlier article within the distance decides (exact text first, then
  the earliest); the article joins that article's cluster or starts its own.
"""

from __future__ import annotations

import struct

from consumer.analysis import Analyzed
from consumer.decisions import Decision, DecisionKind, Source
from indexstore import ArticleRecord, Batch

# What the service keeps beside each article record: when the decision was first made, so a
# re-emitted decision is identical to the first one.
_PAYLOAD = struct.Struct(">q")


def decide(batch: Batch, item: Analyzed, source: Source, now_ms: int) -> Decision:
    prior = batch.lookup(item.id)
    if prior is not None and prior.content_hash == item.content_hash:
        return _from_record(prior, source)
    result = batch.search(
        item.simhash, item.content_hash, item.event_time_ms, exclude_id=item.id, limit=1
    )
    if result.matches:
        best = result.matches[0]
        kind = DecisionKind.DUPLICATE if best.exact else DecisionKind.NEAR_DUPLICATE
        cluster_id, matched_id, distance = best.cluster_id, best.article_id, best.distance
    else:
        kind, cluster_id, matched_id, distance = DecisionKind.UNIQUE, item.id, None, None
    batch.put(
        ArticleRecord(
            article_id=item.id,
            simhash=item.simhash,
            content_hash=item.content_hash,
            event_time_ms=result.event_time_ms,
            cluster_id=cluster_id,
            decision=kind.value,
            matched_id=matched_id,
            distance=distance,
            late=result.late,
            payload=_PAYLOAD.pack(now_ms),
        )
    )
    return Decision(
        id=item.id,
        decision=kind,
        cluster_id=cluster_id,
        matched_id=matched_id,
        distance=distance,
        simhash=item.simhash,
        content_hash=item.content_hash,
        event_time_ms=result.event_time_ms,
        late=result.late,
        source=source,
        processed_at_ms=now_ms,
    )


def _from_record(record: ArticleRecord, source: Source) -> Decision:
    (processed_at_ms,) = _PAYLOAD.unpack(record.payload)
    return Decision(
        id=record.article_id,
        decision=DecisionKind(record.decision),
        cluster_id=record.cluster_id,
        matched_id=record.matched_id,
        distance=record.distance,
        simhash=record.simhash,
        content_hash=record.content_hash,
        event_time_ms=record.event_time_ms,
        late=record.late,
        source=source,
        processed_at_ms=processed_at_ms,
    )
