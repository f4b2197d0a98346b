"""Deciding articles in the order they are handed over, without a broker: `newsdedup check`
reading a file, and the library (`newsdedup.Deduplicator`) taking calls.

The sequence is one partition of the service's event-time order (eventtime.py), read on
demand: an undated article takes the time of the one before it; an article dated far from its
neighbours moves no watermark, since each is decided only once LOOKAHEAD articles past it
have been seen (or the sequence pauses); and articles that came behind later-dated ones
within the reorder window are put back in order. Each batch is decided into the index and
committed with expiry, as the service commits its batches, so the two decide alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from consumer.records import Analyzed, Invalid, Message
from consumer.stream.eventtime import EventTimeOrder, ReorderWindow, Timed, time_of
from consumer.stream.pipeline import Analysis, DecidedBatch, Pipeline

# Articles seen past the one decided: how far ahead its neighbours are looked at when its date
# looks out of place (consumer/stream/eventtime.py).
LOOKAHEAD = 256


class SequenceDecider:
    """One sequence of articles into one index; a pause decides everything handed over."""

    def __init__(self, pipeline: Pipeline, reorder_window: int) -> None:
        self.pipeline = pipeline
        # Idle 0: the one partition is never waited for by the clock; the window waits for
        # the rest of the sequence until a pause says nothing more is coming for now.
        self._order: EventTimeOrder[Analysis] = EventTimeOrder(
            0, window=ReorderWindow(reorder_window)
        )
        self._order.assign([0])
        self._order.behind(0, True)
        self.undated = 0  # dated by the article before them

    def decide(
        self, messages: Sequence[Message], analyzed: Iterable[Analyzed | Invalid], pause: bool
    ) -> DecidedBatch:
        """Queue `messages` with what the workers made of them and decide, into the index, what
        the order releases; with `pause`, everything queued so far. The batch is committed."""
        order = self._order
        entries: list[Timed[Analysis]] = []
        for message, result in zip(messages, analyzed, strict=True):
            order.add(0, (message, result), time_of(result))
            if isinstance(result, Analyzed) and not result.dated:
                self.undated += 1
            if len(order) > LOOKAHEAD:
                entries += order.release(1)
        if pause:
            order.behind(0, False)
            order.caught_up(0)
            entries += list(order.release())
            order.behind(0, True)  # the sequence may go on
        decided = self.pipeline.decide_ordered(entries)
        # The index first, as in the service: a rerun with the same index re-emits the stored
        # decisions (of the articles still in the window: the index is expired as it goes,
        # as the service's is).
        decided.index_batch.commit(expire=True)
        return decided
