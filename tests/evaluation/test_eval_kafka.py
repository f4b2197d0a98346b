"""`newsdedup eval --through-kafka` on the real broker: a small CCTV feed spread over 3
partitions, produced as a backlog, decided by the real service restarted midway, read back
(latest decision per article) and scored with the same code as `check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consumer import cli
from consumer.corpus import shared_data_dir
from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.kafka_feed import partition_of_each

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CORPUS = shared_data_dir() / "zh_cctv_xwlb_2022_2026.jsonl.gz"
ARTICLES, EDITS = 240, 60
MEASURES = ("precision", "recall", "flagged", "wrongly_flagged", "recall_by_kind")


def _eval_through_kafka(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    *options: str,
    corpus: Path = CORPUS,
) -> tuple[dict, dict]:
    """`newsdedup eval --through-kafka` on a corpus (CCTV's by default) with `options`: each
    system's scores by name, and what the service delivered."""
    # Small batches, so that a restart at half the feed lands in the middle of the work.
    monkeypatch.setenv("NEWSDEDUP_KAFKA_BATCH_MAX_MESSAGES", "20")
    argv = [
        *("eval", "--data", str(corpus), "--baselines", "none", "--json", "--through-kafka"),
        *("--bootstrap-servers", bootstrap, *options),
    ]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    return {s["system"]: s for s in report["systems"]}, report["through_kafka"]


def test_articles_are_spread_over_every_partition_the_same_way_for_a_seed() -> None:
    articles = [FeedArticle(str(i), "", "", None) for i in range(300)]  # type: ignore[arg-type]
    spread = partition_of_each(articles, 3, seed=0)
    assert spread == partition_of_each(articles, 3, seed=0)
    assert spread != partition_of_each(articles, 3, seed=1)
    assert all(spread.count(p) > 60 for p in range(3))


@pytest.mark.parametrize(
    ("role", "delivery", "restart"),
    [
        ("all", "exactly_once", "term"),
        ("scaleout", "at_least_once", "kill"),
    ],
)
def test_through_kafka_decides_every_article_once_and_is_scored_like_check(
    kafka_bootstrap: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    role: str,
    delivery: str,
    restart: str,
) -> None:
    systems, kafka = _eval_through_kafka(
        monkeypatch,
        capsys,
        kafka_bootstrap,
        *("--limit", str(ARTICLES), "--edits", str(EDITS), "--partitions", "3"),
        *("--role", role, "--delivery", delivery, "--restart", restart),
    )
    checked, served = systems["newsdedup"], systems["newsdedup-kafka"]
    assert served["error"] is None

    total = ARTICLES + EDITS
    assert kafka["articles"] == total == served["articles"]
    # Every article answered, by a decision of its own key; none dead-lettered or forgotten.
    assert (kafka["decided"], kafka["rejected"], kafka["undecided"]) == (total, 0, 0)
    assert kafka["foreign"] == 0
    # The restart came in the middle, and a SIGTERM'd service stops cleanly.
    assert total // 2 <= kafka["decided_before_restart"] < total
    assert kafka["restart_exit_codes"] == ([0] if restart == "term" else [None] * 4)
    if delivery == "exactly_once":
        # Read committed: no article's answer is ever delivered twice; a record beyond an
        # article's first can only be one that changes its answer (a correction).
        assert kafka["repeated"] == 0
        assert kafka["records"] == total + kafka["changed"]
    else:
        assert kafka["records"] == total + kafka["repeated"] + kafka["changed"]

    # Scored like check: the same pairs, the same measures, per kind of pair too.
    assert served["pairs"] == checked["pairs"] == EDITS
    assert set(served["recall_by_kind"]) == set(checked["recall_by_kind"])
    assert served["precision"] is not None and served["recall"] is not None
    assert served["flagged"] - served["wrongly_flagged"] >= 0
    # In publish order, check never flags an article as a copy of a later one.
    assert kafka["check_matched_later"] == 0
    assert kafka["differ_from_check"] is not None


def test_on_one_partition_the_service_answers_exactly_as_check(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The instrument's control: one partition is read in publish order, as check reads its
    file, so whatever the restart, every latest decision and every score is check's."""
    systems, kafka = _eval_through_kafka(
        monkeypatch, capsys, kafka_bootstrap, "--limit", "120", "--edits", "30", "--partitions", "1"
    )
    assert kafka["decided"] == 150 and kafka["decided_before_restart"] < 150
    assert kafka["differ_from_check"] == 0
    assert kafka["late"] == 0 and kafka["matched_later"] == 0
    checked, served = systems["newsdedup"], systems["newsdedup-kafka"]
    for measure in MEASURES:
        assert served[measure] == checked[measure], measure


def test_a_service_holding_the_whole_feed_is_compared_with_check_holding_it_too(
    kafka_bootstrap: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """With `--kafka-window whole` the service forgets nothing, so its answers are held to
    those of check with the same window (newsdedup-whole), not to those of the configured
    one: a window of two hours here, which misses copies published later than that."""
    config = tmp_path / "short-window.toml"
    config.write_text('[index]\nsegment = "1h"\nretention = "2h"\n')
    systems, kafka = _eval_through_kafka(
        monkeypatch,
        capsys,
        kafka_bootstrap,
        *("--limit", "120", "--edits", "30", "--partitions", "1", "--kafka-window", "whole"),
        *("--config", str(config)),
    )
    configured, whole = systems["newsdedup"], systems["newsdedup-whole"]
    # The two windows answer differently on this feed, or the test would prove nothing.
    assert configured["flagged"] != whole["flagged"]
    assert kafka["window"] == "whole"
    assert kafka["differ_from_check"] == 0
    served = systems["newsdedup-kafka"]
    for measure in MEASURES:
        assert served[measure] == whole[measure], measure


@pytest.mark.parametrize("role", ["all", "scaleout"])
def test_a_templated_feed_through_kafka_is_decided_as_check_decides_it(
    kafka_bootstrap: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    role: str,
) -> None:
    """Half the articles in their site's page template, over 3 partitions, the service killed
    (SIGKILL) halfway: the boilerplate it learned is rebuilt from its index on restart, and
    every latest decision is the one check makes on the feed in publish order."""
    systems, kafka = _eval_through_kafka(
        monkeypatch,
        capsys,
        kafka_bootstrap,
        *("--limit", "400", "--edits", "80", "--templates", "0.5", "--partitions", "3"),
        *("--kafka-window", "whole", "--role", role, "--restart", "kill"),
        corpus=shared_data_dir() / "zh_hkcnews_2017_2022.jsonl.gz",
    )
    assert kafka["decided"] == 480 and kafka["decided_before_restart"] < 480
    assert kafka["late"] == 0
    assert kafka["differ_from_check"] == 0
    assert systems["newsdedup-kafka"]["flagged"] == systems["newsdedup-whole"]["flagged"]
