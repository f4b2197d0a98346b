"""The research replays of `check`'s decision rule reproduce what the real `check` decides:
tools/accuracy-prototype the default rule (band candidates, shingle hashes read near the
threshold), tools/decision-frontier the rule verified by the sketch alone. Their conclusions
(BENCHMARKS.md, docs/accuracy.md) rest on it. Neither replays the boilerplate rule, which needs
the window's counts: `check` runs without it here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from consumer import cli
from consumer.corpus import shared_data_dir

SCRIPTS = Path(__file__).resolve().parents[2] / "tools"
SCRIPT = SCRIPTS / "decision-frontier"
DEFAULT_RULE = "lsh=16x3,lshmin=2,lshcap=4,verify=bottom512"
NO_BOILERPLATE = "[match]\nboilerplate_min_articles = 0\n"
# The rule before band candidates and shingle hashes, as options of today's.
SKETCH_ONLY = NO_BOILERPLATE + "min_jaccard = 0.55\nverify_margin = 0\nband_candidates = 0\n"


def _feed() -> list[str]:
    data = str(shared_data_dir() / "zh_cctv_xwlb_2022_2026.jsonl.gz")
    return ["--data", data, "--limit", "4000", "--edits", "400"]


def _whole_feed_run(capsys, *options: str) -> dict:
    assert cli.main(["eval", *_feed(), "--baselines", "none", "--json", *options]) == 0
    return next(
        s
        for s in json.loads(capsys.readouterr().out)["systems"]
        if s["system"] == "newsdedup-whole"
    )


def test_the_prototype_reproduces_the_whole_feed_run_of_eval(capsys, tmp_path) -> None:
    config = tmp_path / "no-boilerplate.toml"
    config.write_text(NO_BOILERPLATE)
    whole = _whole_feed_run(capsys, "--config", str(config))
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "accuracy-prototype"), *_feed(), DEFAULT_RULE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    row = next(line.split() for line in out.splitlines() if line.startswith(DEFAULT_RULE))
    flagged, wrong, _precision, _pairs, missed = row[1:6]
    assert (int(flagged), int(wrong), int(missed)) == (
        whole["flagged"],
        whole["wrongly_flagged"],
        whole["missed"],
    )
    assert whole["flagged"] > 300


def test_frontier_reproduces_the_whole_feed_run_of_eval(capsys, tmp_path) -> None:
    config = tmp_path / "sketch-only.toml"
    config.write_text(SKETCH_ONLY)
    whole = _whole_feed_run(capsys, "--config", str(config))
    feed = _feed()
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *feed, "--misses", "k=12", "k=12,verify=exact"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows: dict[str, list[str]] = {}
    listed: dict[str, list[str]] = {}
    pairs: list[str] = []
    for line in out.splitlines()[2:]:
        if line.startswith(" "):
            pairs.append(line.strip())
        else:
            rows[line.split()[0]], pairs = line.split()[1:], []
            listed[line.split()[0]] = pairs
    flagged, wrong, _, missed, _ = rows["k=12"]
    assert (int(flagged), int(wrong), int(missed)) == (
        whole["flagged"],
        whole["wrongly_flagged"],
        whole["missed"],
    )
    assert whole["flagged"] > 300  # the sample holds real work: edits and formulaic look-alikes
    # Exact verification never flags wrongly.
    assert rows["k=12,verify=exact"][1] == "0"
    # --misses lists each missed pair once, with what decided its loss.
    for variant, row in rows.items():
        assert len(listed[variant]) == int(row[3])
        for line in listed[variant]:
            _kind, _, distance, _, jaccard, *_ = line.split()
            assert 0 <= int(distance) <= 64 and 0.0 <= float(jaccard) <= 1.0, line
    assert whole["missed"] > 0  # so the listing above was exercised
