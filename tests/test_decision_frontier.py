"""scripts/decision-frontier replays `check`'s decision rule; its conclusions (BENCHMARKS.md,
README "Accuracy") rest on reproducing what the real `check` decides at the defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from consumer import cli
from consumer.corpus import shared_data_dir

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "decision-frontier"


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
        [sys.executable, str(SCRIPT), *feed, "k=12", "k=12,verify=exact"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    flagged, wrong, _, missed, _ = rows["k=12"]
    assert (int(flagged), int(wrong), int(missed)) == (
        whole["flagged"],
        whole["wrongly_flagged"],
        whole["missed"],
    )
    assert whole["flagged"] > 300  # the sample holds real work: edits and formulaic look-alikes
    # Exact verification never flags wrongly.
    assert rows["k=12,verify=exact"][1] == "0"
