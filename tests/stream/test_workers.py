"""The worker pool hands deciding everything the fingerprint stage computed."""

from __future__ import annotations

import gzip
import json
from itertools import islice

from consumer.config import FingerprintConfig, InputConfig
from consumer.corpus import shared_data_dir
from consumer.deciding.article import Analyzed
from consumer.fingerprint.fingerprinter import Fingerprinter
from consumer.stream.workers import Analyzer


def test_pool_workers_carry_bands_and_shingles_to_analyzed() -> None:
    with gzip.open(shared_data_dir() / "zh_hkcnews_2017_2022.jsonl.gz", "rt") as f:
        articles = [json.loads(line) for line in islice(f, 30)]
    works = [(json.dumps(a).encode(), 1_700_000_000_000) for a in articles]
    with Analyzer(InputConfig(), FingerprintConfig(), workers=1) as analyzer:
        results = analyzer.analyze(works)
    expected = Fingerprinter().fingerprint_many([(a["title"], a["content"]) for a in articles])
    assert all(isinstance(r, Analyzed) for r in results)
    got = [(r.sketch, r.bands, r.shingles) for r in results]  # type: ignore[union-attr]
    assert got == [(fp.sketch, fp.bands, fp.shingles) for fp in expected]  # type: ignore[union-attr]
    assert all(len(bands) == 64 and shingles[:1] == b"S" for _, bands, shingles in got)
