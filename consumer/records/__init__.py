"""The record types every layer passes around, in one home at the bottom of the layering (as
Quix Streams keeps its `models/`): what is read (`Message`, feed.py), parsed (`Article`, or
`Invalid` with its `InvalidReason`), refused (`Rejection`), fingerprinted (`Analyzed`,
article.py) and decided (`Decision`, `DecisionKind`, `Source`, decision.py). They are values
with no behaviour beyond their own encoding, so any package may import them.

May import: indexstore's value types and consumer.timetext only.
"""

from consumer.records.article import Analyzed
from consumer.records.decision import SCHEMA_VERSION, Decision, DecisionKind, Source
from consumer.records.feed import Article, Invalid, InvalidReason, Message, Rejection

__all__ = [
    "SCHEMA_VERSION",
    "Analyzed",
    "Article",
    "Decision",
    "DecisionKind",
    "Invalid",
    "InvalidReason",
    "Message",
    "Rejection",
    "Source",
]
