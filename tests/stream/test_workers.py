"""The worker pool: it hands deciding everything the fingerprint stage computed, the same
whichever process makes it; with `pool_after_s` the first batches are fingerprinted in the
calling process, the workers starting only once that much CPU went into it (`newsdedup check`
on a small file)."""

from __future__ import annotations

import json

from feeds import real_articles

from consumer.config import FingerprintConfig, InputConfig
from consumer.fingerprint.fingerprinter import Fingerprinter
from consumer.records import Analyzed
from consumer.stream.workers import Analyzer


def _works(articles: list[dict]) -> list[tuple[bytes, int]]:
    return [(json.dumps(a, ensure_ascii=False).encode(), 0) for a in articles]


def test_the_pool_starts_once_the_inline_fingerprinting_took_its_time() -> None:
    batches = [_works(real_articles("zh_hkcnews_2017_2022.jsonl.gz", 90)[i::3]) for i in range(3)]
    with Analyzer(InputConfig(), FingerprintConfig(), workers=None) as reference:
        want = [reference.analyze(batch) for batch in batches]

    with Analyzer(InputConfig(), FingerprintConfig(), workers=1, pool_after_s=1e-6) as analyzer:
        assert analyzer._pool is None  # nothing spawned for an input that may stay small
        got = [analyzer.analyze(batches[0])]
        assert analyzer._pool is not None  # the first batch took longer than that
        got += [analyzer.analyze(batch) for batch in batches[1:]]
    assert got == want

    with Analyzer(InputConfig(), FingerprintConfig(), workers=1, pool_after_s=3600) as analyzer:
        assert [analyzer.analyze(batch) for batch in batches] == want
        assert analyzer._pool is None

    with Analyzer(InputConfig(), FingerprintConfig(), workers=1) as analyzer:
        assert analyzer._pool is not None  # a service starts its workers at once
        assert [analyzer.analyze(batch) for batch in batches] == want


def test_the_pool_starts_once_when_a_batch_is_asked_for_ahead() -> None:
    # `check` asks for the next batch before it decides this one. Both were asked for while
    # no pool ran, so both are fingerprinted here; the first starts the pool, and the second
    # must not start another (its workers would cost ~0.7 CPU-s each to start, for nothing).
    batches = [_works(real_articles("zh_hkcnews_2017_2022.jsonl.gz", 90)[i::3]) for i in range(3)]
    with Analyzer(InputConfig(), FingerprintConfig(), workers=None) as reference:
        want = [r for batch in batches for r in reference.analyze(batch)]

    with Analyzer(InputConfig(), FingerprintConfig(), workers=1, pool_after_s=1e-6) as analyzer:
        first = analyzer.analyze_chunks(batches[0])
        ahead = analyzer.analyze_chunks(batches[1])
        got = [r for chunk in first for r in chunk]
        pool = analyzer._pool
        assert pool is not None
        got += [r for chunk in ahead for r in chunk]
        assert analyzer._pool is pool
        got += analyzer.analyze(batches[2])
    assert got == want


def test_a_batch_fingerprinted_after_close_starts_no_pool() -> None:
    # A batch asked for before `close` and run after it (a caller unwinding) is fingerprinted
    # here; workers started then would outlive the analyzer, with nothing to end them.
    batches = [_works(real_articles("zh_hkcnews_2017_2022.jsonl.gz", 60)[i::2]) for i in range(2)]
    analyzer = Analyzer(InputConfig(), FingerprintConfig(), workers=1, pool_after_s=1e-6)
    ahead = analyzer.analyze_chunks(batches[0])
    analyzer.close()
    assert all(isinstance(r, Analyzed) for chunk in ahead for r in chunk)
    assert analyzer._pool is None


def test_no_pool_starts_for_an_input_that_is_almost_done() -> None:
    batches = [_works(real_articles("zh_hkcnews_2017_2022.jsonl.gz", 60)[i::2]) for i in range(2)]
    first_bytes = sum(len(value) for value, _ in batches[0])

    # Past its time after the first batch, with nothing left of the input said to be that big.
    with Analyzer(
        InputConfig(), FingerprintConfig(), workers=1, pool_after_s=1e-6, input_bytes=first_bytes
    ) as analyzer:
        analyzer.analyze(batches[0])
        assert analyzer._pool is None
        analyzer.analyze(batches[1])
        assert analyzer._pool is None

    # The same with a thousand times as much left: the workers start for the next batch.
    with Analyzer(
        InputConfig(),
        FingerprintConfig(),
        workers=1,
        pool_after_s=1e-6,
        input_bytes=1000 * first_bytes,
    ) as analyzer:
        analyzer.analyze(batches[0])
        assert analyzer._pool is not None


def test_pool_workers_carry_bands_and_shingles_to_analyzed() -> None:
    articles = real_articles("zh_hkcnews_2017_2022.jsonl.gz", 30)
    with Analyzer(InputConfig(), FingerprintConfig(), workers=1) as analyzer:
        results = analyzer.analyze(_works(articles))
    expected = Fingerprinter().fingerprint_many([(a["title"], a["content"]) for a in articles])
    assert all(isinstance(r, Analyzed) for r in results)
    got = [(r.sketch, r.bands, r.shingles) for r in results]  # type: ignore[union-attr]
    assert got == [(fp.sketch, fp.bands, fp.shingles) for fp in expected]
    assert all(len(bands) == 64 and shingles[:1] == b"S" for _, bands, shingles in got)
