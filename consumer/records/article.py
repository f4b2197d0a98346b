"""The article as deciding sees it: what the fingerprint left of it, and its time."""

from __future__ import annotations

from dataclasses import field

from indexstore.value import value_type


@value_type
class Analyzed:
    """A valid article, reduced to what the deciding stage needs."""

    id: str
    event_time_ms: int
    simhash: int
    content_hash: bytes
    sketch: bytes = b""
    # LSH band keys and the bottom-512 shingles record (consumer/fingerprint/shingles.py), b""
    # for none. Keyword-only, so the positional text_chars and dated after them keep their
    # places in every caller.
    bands: bytes = field(default=b"", kw_only=True)
    shingles: bytes = field(default=b"", kw_only=True)
    text_chars: int = 0
    dated: bool = True
    """False when the article had no published_at: its event time is then set by its place in
    the stream (consumer/stream/eventtime.py), not by this stand-in."""
