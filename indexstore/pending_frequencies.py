"""A batch's key-frequency changes: what its puts change, before anything is written.

`Batch.frequencies` answers for the window with this batch's puts included, and its commit
hands the same changes on for the store's `FrequencyTable` (indexstore/frequencies.py). So each
change is kept twice: in the order made, as the commit hands them on, and summed by key, with
each segment's part, for the batch's own answers. A row put and then replaced in the same batch
is never written, so its change is withdrawn from both; a segment the window leaves before the
commit stops counting in the sum, as it does in the store's table. It may import numpy,
indexstore.frequencies and indexstore.tally.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from indexstore.frequencies import FrequencyPolicy
from indexstore.tally import new_tally

# A segment, the keys of one row in it, and +1 (the row starts counting) or -1 (it stops).
Change = tuple[int, np.ndarray, int]


class PendingFrequencies:
    """The key-frequency changes of one batch's puts (none without a `FrequencyPolicy`)."""

    def __init__(self, policy: FrequencyPolicy | None, segment_ms: int) -> None:
        self._policy = policy
        self._segment_ms = segment_ms
        # A change set to None: its row was replaced in this batch, and is never written.
        self._changes: list[Change | None] = []
        self._change_of_row: dict[int, int] = {}  # a row put in this batch -> its change
        self._folded_first: int | None = None  # segments before it left this batch's total
        # Keys counted by this batch's puts: their total, and each segment's (+1 or -1 each)
        # for when the window leaves a segment before the commit.
        self._total = new_tally()
        self._tallied = False
        self._keys: dict[int, list[tuple[np.ndarray, int]]] = defaultdict(list)

    @property
    def kept(self) -> bool:
        """Whether the index keeps key frequencies at all."""
        return self._policy is not None

    def counts(self, payload: bytes) -> bool:
        """Whether a record with this payload counts its keys (read before its shingles are)."""
        return self._policy is not None and self._policy.counts(payload)

    def count(self, segment: int, shingles: bytes, sign: int, seq: int | None = None) -> None:
        """A counted row in `segment` with these shingles starts (+1: put in this batch as row
        `seq`) or stops (-1: a committed row) counting its keys."""
        if self._policy is None or not shingles:
            return
        keys = self._policy.keys(shingles)
        if not len(keys):
            return
        if seq is not None:
            self._change_of_row[seq] = len(self._changes)
        self._changes.append((segment, keys, sign))
        self._add(segment, keys, sign)

    def uncount(self, seq: int) -> None:
        """Row `seq`, put in this batch, is replaced in it: it is never written, so its keys
        never count, in this batch or after."""
        at = self._change_of_row.pop(seq, None)
        change = None if at is None else self._changes[at]
        if at is None or change is None:
            return
        self._changes[at] = None
        self._add(change[0], change[1], -1)

    def add_to(self, counts: np.ndarray, keys: np.ndarray, first: int | None) -> None:
        """Add to the committed `counts` of `keys` what this batch changes in the segments
        from `first` on (None: all)."""
        self._fold(first)
        if self._tallied:
            counts += self._total.get(keys)

    def holds_rows(self, low: int | None, high: int) -> bool:
        """Whether this batch counts rows in a segment from `low` (None: any) up to `high`."""
        return any(
            (low is None or low <= segment) and segment < high and changes
            for segment, changes in self._keys.items()
        )

    def written(self, cut: int | None) -> list[Change]:
        """The changes a commit hands on that drops the segments ending by `cut` (None: none):
        the keys of rows never written (replaced, or their segment left the window) never
        count."""
        seg_ms = self._segment_ms
        return [
            change
            for change in self._changes
            if change is not None
            and (change[2] < 0 or cut is None or (change[0] + 1) * seg_ms > cut)
        ]

    def _fold(self, first: int | None) -> None:
        """Take the segments the window has left out of this batch's total, once each."""
        if first is None or (self._folded_first is not None and first <= self._folded_first):
            return
        for segment in [s for s in self._keys if s < first]:
            for keys, sign in self._keys.pop(segment):
                self._tally(keys, -sign)
        self._folded_first = first

    def _add(self, segment: int, keys: np.ndarray, sign: int) -> None:
        if self._folded_first is not None and segment < self._folded_first:
            return  # the window has left it: it no longer counts here
        self._keys[segment].append((keys, sign))
        self._tally(keys, sign)

    def _tally(self, keys: np.ndarray, sign: int) -> None:
        self._total.add(keys, sign)
        self._tallied = True
