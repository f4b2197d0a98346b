"""Chains of copies delivered in any order, decided by the pipeline against a real index: the
latest record per article is `check`'s answer on the feed sorted by event time."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import pytest
from chains import (
    Copy,
    chain_articles,
    check_answer,
    differences,
    latest_per_key,
    template_pages,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.config import FingerprintConfig, IndexConfig, InputConfig
from consumer.records import Message, Source
from consumer.roles.decider import Decider
from consumer.scaleout.domains import DomainStores
from consumer.scaleout.wire import decode_changes, encode_fingerprinted
from consumer.stream.pipeline import Pipeline
from consumer.stream.state import open_index
from consumer.stream.workers import Analyzer

INDEX = IndexConfig(retention="36500d", segment="30d")


@pytest.fixture(scope="module")
def analyzer():
    with Analyzer(InputConfig(), FingerprintConfig(), workers=None) as a:
        yield a


def _copies(max_copies: int) -> st.SearchStrategy[list[Copy]]:
    # `parent` may name any article before the copy: the original or a copy of it.
    copy = st.builds(Copy, st.integers(0, max_copies), st.booleans(), st.integers(1, 120))
    return st.lists(copy, min_size=1, max_size=max_copies)


@st.composite
def deliveries(draw, max_chains: int = 3, max_copies: int = 5):
    """Some chains, their articles in a random arrival order, cut into random batches."""
    seed = draw(st.integers(0, 2**16))
    chains = draw(st.lists(_copies(max_copies), min_size=1, max_size=max_chains))
    articles = [a for n, copies in enumerate(chains) for a in chain_articles(n, copies, seed)]
    arrival = draw(st.permutations(articles))
    cuts = draw(st.sets(st.integers(1, len(arrival) - 1), max_size=4)) if len(arrival) > 1 else ()
    bounds = [0, *sorted(cuts), len(arrival)]
    batches = [arrival[a:b] for a, b in itertools.pairwise(bounds)]
    # The batch whose outputs a crash loses (-1: none).
    lost = draw(st.sampled_from([-1, *range(len(batches))]))
    return batches, lost


def _messages(batch: list[dict], first_offset: int) -> list[Message]:
    return [
        Message(None, json.dumps(a).encode(), Source("feed", 0, first_offset + i), 0)
        for i, a in enumerate(batch)
    ]


def _decided(
    analyzer: Analyzer, index_dir: Path, batches: list[list[dict]], lost: int = -1
) -> list[dict]:
    """Every record `--role all` publishes for these batches, in publishing order: each
    batch's decisions, then its corrections. Batch `lost` crashes after its index commit,
    before its outputs are published, and is delivered again."""
    published = []
    with open_index(INDEX, str(index_dir)) as store:
        pipeline = Pipeline(store, analyzer)
        offset = 0
        for n, batch in enumerate(batches):
            for _ in range(2 if n == lost else 1):
                decided = pipeline.decide(_messages(batch, offset))
                decided.index_batch.commit()
                outputs = [d.to_dict() for d in (*decided.decisions, *decided.corrections)]
            published += outputs
            offset += len(batch)
    return published


def _decided_by_the_decide_role(
    analyzer: Analyzer, root: Path, batches: list[list[dict]], lost: int = -1
) -> list[dict]:
    """The same through the scale-out decide role's decider: every record it publishes, and
    every changed index record in its changelog output."""
    published = []
    with DomainStores(INDEX, root) as stores:
        decider = Decider(stores)
        offset = 0
        for n, batch in enumerate(batches):
            messages = []
            for m in _messages(batch, offset):
                (item,) = [r for c in analyzer.analyze_chunks([(m.value, 0)]) for r in c]
                value = encode_fingerprinted(item, m.source)
                messages.append(Message(b"", value, Source("internal", 0, m.source.offset), 0))
            for _ in range(2 if n == lost else 1):
                decided = decider.decide(messages)
                decided.index_batch.commit()
                outputs = [d.to_dict() for d in (*decided.outcomes, *decided.corrections)]
                # The changelog carries every record the batch changed, corrections included.
                changes = decode_changes(
                    [c.key for c in decided.changes], [c.value for c in decided.changes]
                )
                logged = {i for _, columns in changes.values() for i in columns.article_id}
                assert {d["id"] for d in outputs} <= logged
            published += outputs
            offset += len(batch)
    return published


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(deliveries(), st.booleans())
def test_the_latest_record_of_every_article_is_checks_answer_on_the_sorted_feed(
    analyzer, delivered, decide_role
):
    """Also when a batch's outputs are lost after its index commit and it is delivered again
    (its corrections are published again from the index), and in the decide role."""
    _assert_answered_as_check(analyzer, *delivered, decide_role)


def _assert_answered_as_check(
    analyzer: Analyzer, batches: list[list[dict]], lost: int, decide_role: bool
) -> None:
    """The latest record of every article, as `--role all` or the decide role publishes them
    for these batches (batch `lost` delivered again), is `check`'s answer on the sorted feed."""
    articles = [a for batch in batches for a in batch]
    decided = _decided_by_the_decide_role if decide_role else _decided
    with tempfile.TemporaryDirectory(prefix="chains-") as tmp:
        got = latest_per_key(decided(analyzer, Path(tmp, "index"), batches, lost))
    wrong = differences(got, check_answer(articles))
    assert not wrong, "\n".join(wrong)


@st.composite
def template_deliveries(draw, max_pages: int = 20):
    """A site's unrelated pages under one footer (`template_pages`), in time order, cut into
    random batches."""
    pages = template_pages(draw(st.integers(4, max_pages)), draw(st.integers(0, 2**16)))
    cuts = draw(st.sets(st.integers(1, len(pages) - 1), max_size=4))
    bounds = [0, *sorted(cuts), len(pages)]
    batches = [pages[a:b] for a, b in itertools.pairwise(bounds)]
    # The batch whose outputs a crash loses (-1: none).
    return batches, draw(st.sampled_from([-1, *range(len(batches))]))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(template_deliveries(), st.booleans())
def test_pages_under_one_template_are_answered_as_check_answers_them(
    analyzer, delivered, decide_role
):
    """The first pages are copies that count their samples, the footer not yet known: what
    they counted is kept from batch to batch, through a crash that loses a batch's outputs
    too. (Out of order, an article decided again is judged against the boilerplate the window
    knows then: docs/time-model.md.)"""
    _assert_answered_as_check(analyzer, *delivered, decide_role)


def test_the_first_pages_under_a_template_are_copies_the_later_ones_are_not() -> None:
    """What the test above replays: in time order the footer makes the first pages copies of
    each other; they count their samples all the same, so it is known for a template after a
    window's few stories have carried it (`DENSER_FEWEST_ARTICLES`), and the later pages are
    unique. Copies that counted nothing left every page a copy."""
    for seed in range(3):
        answer = check_answer(template_pages(20, seed))
        flagged = {i for i, d in answer.items() if d["decision"] != "unique"}
        assert flagged and flagged <= {f"p{n}" for n in range(1, 10)}, (seed, sorted(flagged))


def test_an_original_after_a_copy_and_its_mirror_settles_both(analyzer, tmp_path):
    """O arrives after C1 (its edited copy, 30 min later) and C2 (C1 verbatim, 60 min after O),
    which was decided as a duplicate of C1: C2 must end in O's cluster too."""
    o, c1, c2 = chain_articles(0, [Copy(0, True, 30), Copy(1, False, 30)], seed=1)
    got = latest_per_key(_decided(analyzer, tmp_path / "index", [[c1], [c2], [o]]))
    want = check_answer([o, c1, c2])
    assert want[c2["id"]]["cluster_id"] == o["id"]
    assert not differences(got, want), "\n".join(differences(got, want))


@pytest.mark.parametrize("decide_role", [False, True], ids=["role-all", "decide-role"])
def test_a_redelivered_original_publishes_the_corrections_down_the_chain_again(
    analyzer, tmp_path, decide_role
):
    """O's first outputs are lost after its index commit: delivered again, it publishes C1's
    correction and C2's, which only followed C1 into O's cluster."""
    o, c1, c2 = chain_articles(0, [Copy(0, True, 30), Copy(1, False, 30)], seed=1)
    decided = _decided_by_the_decide_role if decide_role else _decided
    got = latest_per_key(decided(analyzer, tmp_path / "index", [[c1, c2], [o]], lost=1))
    assert not differences(got, check_answer([o, c1, c2]))


def test_the_later_article_is_the_one_judged_as_check_judges_it(analyzer, tmp_path):
    """A sentence or two (under `[match] sentence_chars`) needs more shingles in common than a
    longer text: an edited copy longer than that, decided before its shorter original arrived,
    is judged by its own length, as `check` judges it on the sorted feed."""
    # Seed 16: the original is 148 characters, its edited copy 204.
    original, copy = chain_articles(0, [Copy(0, True, 30)], seed=16)
    assert len(original["content"]) < 200 <= len(copy["content"])
    want = check_answer([original, copy])
    assert want[copy["id"]]["matched_id"] == original["id"]
    got = latest_per_key(_decided(analyzer, tmp_path / "index", [[copy], [original]]))
    assert not differences(got, want), "\n".join(differences(got, want))
