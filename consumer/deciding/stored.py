"""The decision as the service keeps it beside each article: the index record's payload.

The index stores this payload without reading it (indexstore: `ArticleRecord.payload`), so
the decision message can change without changing the index's format; this module alone
builds and reads it. Layout:

    >B  version (1)
    >B  flags: bits 0-1 decision kind (unique, duplicate, near_duplicate), bit 2 late,
        bit 3 matched id present, bit 4 the article is its own cluster (no cluster id stored),
        bit 5 processed_at unknown, bit 6 text length present, bit 7 a copy that counts its
        sample as an original does (`StoredDecision.counted`)
    >b  distance (-1: none)
    >q  processed_at ms: when the decision was first made, so a re-emitted one is identical
    >H  cluster id length   >H  matched id length
    cluster id, matched id (UTF-8), then the ids of the articles this one corrected
    (consumer/deciding/corrections.py), each a >H length and UTF-8; with bit 6, the first of
    those entries is the article's text length instead, as `TEXT_CHARS_ENTRY` and decimal
    digits: an earlier release, which knows no bit 6, reads it as one more corrected id, finds
    no such article and skips it, so going back to it after this one wrote records is safe

Most articles are their own cluster: the flag spares storing the id twice, and tells a
search whether a match is an original without decoding the rest. A new version byte lets
a later layout be read beside this one.
"""

from __future__ import annotations

import struct

from consumer.records import DecisionKind
from indexstore.value import value_type

VERSION = 1
_HEAD = struct.Struct(">BBbqHH")
_ID_LENGTH = struct.Struct(">H")
# Stable numbering of the kinds on disk, whatever the order of the enum.
_KINDS = (DecisionKind.UNIQUE, DecisionKind.DUPLICATE, DecisionKind.NEAR_DUPLICATE)
_KIND_BITS = {kind: i for i, kind in enumerate(_KINDS)}
_KIND_MASK = 0b11
_LATE = 1 << 2
_MATCHED = 1 << 3
_OWN_CLUSTER = 1 << 4
_NO_TIME = 1 << 5
_TEXT_CHARS = 1 << 6
_COUNTED = 1 << 7
# No article id starts with a NUL character.
TEXT_CHARS_ENTRY = "\0text_chars="
_FLAGS_AT = 1


class StoredFormatError(ValueError):
    """A payload that is not a decision of a version this build reads."""


@value_type
class StoredDecision:
    """What the service keeps of an article's decision, beside the index's own fields."""

    kind: DecisionKind
    cluster_id: str
    matched_id: str | None
    distance: int | None
    late: bool
    processed_at_ms: int | None
    """None when unknown: the service always records it."""
    corrected: tuple[str, ...] = ()
    """Articles this one's arrival decided again (their corrections are republished with it)."""
    text_chars: int | None = None
    """The article's text length, which some rules judge it by: kept so that it can be decided
    again later, as it was (consumer/deciding/corrections.py). None in records written before
    it was kept."""
    counted: bool = False
    """A copy that counts its sample of shingles in the window's boilerplate, as an original
    does: it and its match each tell a story of their own beside what they share
    (consumer/deciding/boilerplate.py, `tells_its_own_story`)."""


def encode(article_id: str, decision: StoredDecision) -> bytes:
    own = decision.cluster_id == article_id
    cluster = b"" if own else decision.cluster_id.encode("utf-8")
    matched = b"" if decision.matched_id is None else decision.matched_id.encode("utf-8")
    flags = (
        _KIND_BITS[decision.kind]
        | (_LATE if decision.late else 0)
        | (_MATCHED if decision.matched_id is not None else 0)
        | (_OWN_CLUSTER if own else 0)
        | (_NO_TIME if decision.processed_at_ms is None else 0)
        | (_TEXT_CHARS if decision.text_chars is not None else 0)
        | (_COUNTED if decision.counted else 0)
    )
    parts = [
        _HEAD.pack(
            VERSION,
            flags,
            -1 if decision.distance is None else decision.distance,
            decision.processed_at_ms or 0,
            len(cluster),
            len(matched),
        ),
        cluster,
        matched,
    ]
    entries = list(decision.corrected)
    if decision.text_chars is not None:
        entries.insert(0, f"{TEXT_CHARS_ENTRY}{decision.text_chars}")
    for entry in entries:
        raw = entry.encode("utf-8")
        parts += [_ID_LENGTH.pack(len(raw)), raw]
    return b"".join(parts)


def decode(article_id: str, payload: bytes) -> StoredDecision:
    if payload[:1] != bytes([VERSION]) or len(payload) < _HEAD.size:
        raise StoredFormatError(
            f"the stored decision of {article_id!r} is not of version {VERSION} "
            f"(first byte {payload[:1].hex() or 'none'})"
        )
    _, flags, distance, processed_at, n_cluster, n_matched = _HEAD.unpack_from(payload)
    at = _HEAD.size
    cluster_id = article_id if flags & _OWN_CLUSTER else payload[at : at + n_cluster].decode()
    at += n_cluster
    matched_id = payload[at : at + n_matched].decode() if flags & _MATCHED else None
    at += n_matched
    corrected = []
    while at + _ID_LENGTH.size <= len(payload):
        (n,) = _ID_LENGTH.unpack_from(payload, at)
        at += _ID_LENGTH.size
        corrected.append(payload[at : at + n].decode())
        at += n
    text_chars = None
    if flags & _TEXT_CHARS and corrected and corrected[0].startswith(TEXT_CHARS_ENTRY):
        text_chars = int(corrected.pop(0)[len(TEXT_CHARS_ENTRY) :])
    return StoredDecision(
        kind=_KINDS[flags & _KIND_MASK],
        cluster_id=cluster_id,
        matched_id=matched_id,
        distance=None if distance < 0 else distance,
        late=bool(flags & _LATE),
        processed_at_ms=None if flags & _NO_TIME else processed_at,
        corrected=tuple(corrected),
        text_chars=text_chars,
        counted=bool(flags & _COUNTED),
    )


def decode_or_none(article_id: str, payload: bytes) -> StoredDecision | None:
    """The stored decision, or None for a payload that is not one (an index written by other
    code than the service, e.g. `newsdedup bench index`)."""
    try:
        return decode(article_id, payload)
    except (StoredFormatError, struct.error, UnicodeDecodeError):
        return None


def is_own_cluster(payload: bytes) -> bool:
    """Whether the article started its own cluster: a match's check, without decoding."""
    return bool(payload[_FLAGS_AT] & _OWN_CLUSTER)


def counts_sample(payload: bytes) -> bool:
    """Whether the article counts its sample in the window's boilerplate: it started its own
    cluster, or it is a copy that tells a story of its own (`StoredDecision.counted`)."""
    return bool(payload[_FLAGS_AT] & (_OWN_CLUSTER | _COUNTED))


def cluster_of(article_id: str, payload: bytes) -> str:
    """The article's cluster id, decoding no more than it needs."""
    if payload[_FLAGS_AT] & _OWN_CLUSTER:
        return article_id
    (n_cluster,) = _ID_LENGTH.unpack_from(payload, _HEAD.size - 2 * _ID_LENGTH.size)
    return payload[_HEAD.size : _HEAD.size + n_cluster].decode()
