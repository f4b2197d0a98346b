"""scripts/decision-frontier replays `check`'s decision rule; its conclusions (BENCHMARKS.md,
README "Accuracy") rest on reproducing what the real `check` decides at the defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from consumer import cli
from consumer.corpus import shared_data_dir

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "decision-frontier"


def test_frontier_reproduces_the_whole_feed_run_of_eval(capsys) -> None:
    data = str(shared_data_dir() / "zh_cctv_xwlb_2022_2026.jsonl.gz")
    feed = ["--data", data, "--limit", "4000", "--edits", "400"]
    assert cli.main(["eval", *feed, "--baselines", "none", "--json"]) == 0
    whole = next(
        s
        for s in json.loads(capsys.readouterr().out)["systems"]
        if s["system"] == "newsdedup-whole"
    )
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
