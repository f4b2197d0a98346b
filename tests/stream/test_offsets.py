"""A partition's commits when its records are decided out of offset order: after a restart
from any commit, exactly the records that commit did not cover are decided again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.stream.offsets import PartitionReads


@st.composite
def histories(draw):
    """Records read in offset order and decided in any order, with commits in between."""
    n = draw(st.integers(1, 40))
    decide_order = draw(st.permutations(range(n)))
    commit_after = draw(st.sets(st.integers(0, n - 1)))
    first = draw(st.integers(0, 1000))
    return first, list(decide_order), commit_after


@given(histories(), st.booleans())
def test_a_restart_from_the_last_commit_decides_exactly_what_it_did_not_cover(history, fresh):
    first, decide_order, commit_after = history
    n = len(decide_order)
    reads = PartitionReads.from_commit(None if fresh else first, None)
    for offset in range(first, first + n):
        assert reads.read(offset)
        reads.queued[offset] = 0
    durable: set[int] = set()
    last_commit = None
    decided: set[int] = set()
    for step, k in enumerate(decide_order):
        reads.decided(first + k)
        decided.add(first + k)
        if step in commit_after:
            last_commit = reads.commit()
            assert last_commit is not None
            reads.committed_at(last_commit[0])
            durable = set(decided)
    # A crash: the next owner starts from the last commit and reads on from it.
    if last_commit is None:
        return
    offset, metadata = last_commit
    assert offset == min(set(range(first, first + n)) - durable, default=first + n)
    again = PartitionReads.from_commit(offset, metadata)
    decided_again = {o for o in range(offset, first + n) if again.read(o)}
    assert decided_again == set(range(first, first + n)) - durable
    # Nothing read twice in one life.
    assert not again.read(first + n - 1)


def test_a_commit_names_runs_of_decided_records_above_its_offset():
    reads = PartitionReads.from_commit(100, None)
    for offset in range(100, 110):
        reads.read(offset)
        reads.queued[offset] = 0
    for offset in (103, 104, 105, 108):
        reads.decided(offset)
    assert reads.commit() == (100, "done:3-5,8")
    reads.committed_at(100)
    reads.decided(100)
    assert reads.restart() == 100  # what was decided since the commit is decided again
    assert reads.commit() == (100, "done:3-5,8")
