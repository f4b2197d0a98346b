"""The article as deciding sees it: what the fingerprint left of it, and its time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Analyzed:
    """A valid article, reduced to what the deciding stage needs."""

    id: str
    event_time_ms: int
    simhash: int
    content_hash: bytes
    sketch: bytes = b""
    bands: bytes = b""
    shingles: bytes = b""
    text_chars: int = 0
    dated: bool = True
    """False when the article had no published_at: its event time is then set by its place in
    the stream (consumer/stream/eventtime.py), not by this stand-in."""
