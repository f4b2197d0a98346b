"""The window: which event times the index still searches, as of its watermark.

The window starts `retention_ms` behind the watermark. An article older than that start is
late: kept, so that its id stays known, but never searchable; a segment that ends at or
before it has expired. The start is computed here once, for the batch's searches and puts
(one watermark), for a bulk load (the watermark each record meets, as an array), for the key
frequencies and for expiry, so that those ways of reading the window cannot drift apart.

It may import numpy only.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

# One watermark, or one per record (a bulk load).
Watermark = TypeVar("Watermark", int, np.ndarray)


def window_start(watermark: Watermark, retention_ms: int) -> Watermark:
    """The oldest event time still in the window at `watermark`: older is late."""
    return watermark - retention_ms


def is_late(event_time_ms: int, start: int | None) -> bool:
    """Whether an article of this event time is older than the window starting at `start`
    (None: no watermark yet, so nothing is late)."""
    return start is not None and event_time_ms < start


def are_late(event_times_ms: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """`is_late` for a bulk load: each event time against the window start its record meets."""
    return event_times_ms < starts
