"""An article that arrives after a later-published copy of it: the rules against a real index."""

from __future__ import annotations

import dataclasses

from consumer.config import IndexConfig
from consumer.deciding import stored
from consumer.deciding.rules import decide
from consumer.records import Analyzed, DecisionKind, Source
from consumer.stream.state import open_index

INDEX = IndexConfig(retention="36500d", segment="30d")
T0 = 1_700_000_000_000
TEXT = b"\x07" * 16  # one content hash: the two are the same text


def _article(article_id: str, minutes: int) -> Analyzed:
    return Analyzed(article_id, T0 + minutes * 60_000, 0x1234_5678_9ABC_DEF0, TEXT)


def test_the_earlier_article_is_the_original_and_the_copy_is_corrected(tmp_path):
    with open_index(INDEX, str(tmp_path / "index")) as store:
        with store.begin() as batch:
            copy, none = decide(batch, _article("copy", 10), Source("feed", 1, 0), T0)
        assert copy.decision is DecisionKind.UNIQUE and not none
        with store.begin() as batch:
            original, corrections = decide(batch, _article("orig", 0), Source("feed", 0, 0), T0)
        # Never a copy of an article published after it...
        assert original.decision is DecisionKind.UNIQUE and original.matched_id is None
        # ...and the copy is decided again, into the original's cluster.
        (corrected,) = corrections
        assert corrected.id == "copy" and corrected.correction
        assert corrected.decision is DecisionKind.DUPLICATE
        assert (corrected.matched_id, corrected.cluster_id) == ("orig", "orig")
        assert stored.decode("copy", store.get("copy").payload).cluster_id == "orig"
        # A re-delivery of the original (its outputs lost in a crash) publishes both again.
        with store.begin() as batch:
            again, corrections = decide(batch, _article("orig", 0), Source("feed", 0, 0), T0)
        assert again.decision is DecisionKind.UNIQUE
        assert [(c.id, c.cluster_id, c.correction) for c in corrections] == [("copy", "orig", True)]


def test_a_copy_arriving_in_order_corrects_nothing(tmp_path):
    with open_index(INDEX, str(tmp_path / "index")) as store:
        with store.begin() as batch:
            decide(batch, _article("orig", 0), Source("feed", 0, 0), T0)
        with store.begin() as batch:
            copy, corrections = decide(batch, _article("copy", 10), Source("feed", 1, 0), T0)
        assert copy.decision is DecisionKind.DUPLICATE and copy.matched_id == "orig"
        assert corrections == []


def test_copies_published_later_take_no_places_among_an_articles_candidates(tmp_path):
    """More later copies than the candidates an article looks at, all closer than its own
    original: it is still decided against the original, and they join its cluster."""
    later = 40
    with open_index(INDEX, str(tmp_path / "index")) as store:
        with store.begin() as batch:
            # Three bits from the article: farther than every later copy.
            original = dataclasses.replace(_article("orig", 0), simhash=0x1234_5678_9ABC_DEF7)
            decide(batch, original, Source("feed", 0, 0), T0)
            for n in range(later):
                decide(batch, _article(f"copy-{n}", 20 + n), Source("feed", 0, 1 + n), T0)
        with store.begin() as batch:
            article, corrections = decide(batch, _article("art", 10), Source("feed", 0, 99), T0)
    assert (article.matched_id, article.cluster_id) == ("orig", "orig")
    assert len(corrections) == later
    assert {(c.matched_id, c.cluster_id) for c in corrections} == {("art", "orig")}
