"""Event times as text and as epoch milliseconds: what a feed's `published_at` may say, and how
a decision writes a time. The lowest layer: imports nothing of the project.
"""

from __future__ import annotations

import email.utils
import math
import time
from datetime import UTC, datetime, timedelta
from functools import lru_cache

# Event times outside these bounds are typos or units mistakes (seconds for milliseconds).
_MIN_EVENT_MS = 0
_MAX_EVENT_MS = int(datetime(2200, 1, 1, tzinfo=UTC).timestamp() * 1000)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Besides ISO-8601 and RFC 2822 (RSS), layouts seen in real feeds and archives.
_EXTRA_LAYOUTS = (
    "%d-%b-%Y %H:%M:%S.%f",  # 26-FEB-1987 15:14:36.41 (wire archives)
    "%d-%b-%Y %H:%M:%S",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
    "%Y年%m月%d日 %H:%M",
    "%Y年%m月%d日",
)


def parse_event_time_ms(value: object) -> int:
    """ISO-8601, RFC 2822 or a few common layouts (a zone-less time is UTC; a date alone is its
    midnight UTC), or epoch milliseconds as a number or a string of digits."""
    if isinstance(value, bool):
        raise ValueError("expected a date-time text or epoch milliseconds, got a boolean")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a finite number: {value}")
        ms = int(value)
    elif isinstance(value, str):
        text = value.strip()
        ms = int(text) if text.isdigit() else _parse_date_text(text)
    else:
        raise ValueError(
            f"expected a date-time text or epoch milliseconds, got {type(value).__name__}"
        )
    if not _MIN_EVENT_MS <= ms < _MAX_EVENT_MS:
        raise ValueError(f"{ms} ms is outside 1970..2200 (seconds given as milliseconds?)")
    return ms


def _parse_date_text(text: str) -> int:
    parsed: datetime | None = None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            for layout in _EXTRA_LAYOUTS:
                try:
                    parsed = datetime.strptime(text, layout)
                    break
                except ValueError:
                    continue
    if parsed is None:
        raise ValueError(f"not a date-time or epoch milliseconds: {text[:60]!r}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    # Integer arithmetic: timestamp() * 1000 would turn .41 s into 409 ms.
    return (parsed - _EPOCH) // timedelta(milliseconds=1)


# Decisions of one batch share their processed_at, and feeds repeat event times (a bulletin's
# items, a wire's batch): strftime costs as much as encoding the rest of a decision.
@lru_cache(maxsize=4096)
def format_time_ms(ms: int) -> str:
    """Epoch milliseconds → '2026-11-22T02:00:00Z', with '.120' when there are milliseconds."""
    # time.gmtime, not datetime: half the cost, and most event times are seen once.
    seconds, milliseconds = divmod(ms, 1000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{text}.{milliseconds:03d}Z" if milliseconds else text + "Z"
