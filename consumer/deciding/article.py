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
    """16 little-endian u32 LSH band keys over the sketch's minima (64 bytes), or b"" when the
    article has none: a second way to find candidates SimHash misses."""
    shingles: bytes = b""
    """The article's bottom-512 shingle hashes, Rice coded: what a candidate is verified with."""
    text_chars: int = 0
    dated: bool = True
    """False when the article had no published_at: its event time is then set by its place in
    the stream (consumer/stream/eventtime.py), not by this stand-in."""
