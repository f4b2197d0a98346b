"""What the command line says: help texts, numbers as a person reads them, line numbers, log
fields, and synthetic feeds that do not collide."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from pathlib import Path

import pytest
from service_support import NEWSDEDUP

from benchmarks.__main__ import main as benchmarks_main
from consumer.cli import main
from consumer.config import load_config
from consumer.roles.all import all_service
from consumer.samplefeed import generate_feed
from indexstore.layout import choose_layout


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`newsdedup ARGV --help`, or with "benchmarks" first, `python -m benchmarks … --help`
    (the Kafka benchmarks, which run from a checkout)."""
    with pytest.raises(SystemExit) as exited:
        if argv[0] == "benchmarks":
            benchmarks_main([*argv[1:], "--help"])
        else:
            main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_hamming_help_describes_it_and_says_up_to_16_digits(capsys) -> None:
    text = help_text(capsys, "hamming")
    assert "bits in which two 64-bit SimHash fingerprints differ" in text
    assert "up to 16 hex digits" in text
    assert main(["hamming", "f", "0x0f"]) == 0
    assert capsys.readouterr().out.strip() == "0"


def test_index_get_id_has_help(capsys) -> None:
    assert re.search(r"^  ID {2,}\S", help_text(capsys, "index", "get"), re.MULTILINE)


def test_bench_restore_and_scaleout_describe_themselves(capsys) -> None:
    restore = help_text(capsys, "benchmarks", "restore")
    scaleout = help_text(capsys, "benchmarks", "scaleout")
    assert "taking a partition over" in restore and "second fingerprint" not in restore
    assert "second fingerprint instance" in scaleout and "partition over" not in scaleout


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (("produce",), "--limit"),
        (("produce",), "--rate"),
        (("build-idf",), "--limit"),
        (("benchmarks", "pipeline"), "--limit"),
        (("benchmarks", "pipeline"), "--rate"),
        (("benchmarks", "scaleout"), "--limit"),
        (("benchmarks", "restore"), "--records"),
        (("benchmarks", "soak"), "--minutes"),
        (("benchmarks", "soak"), "--rate"),
        (("benchmarks", "soak"), "--limit"),
        (("bench", "index"), "--ops"),
    ],
)
def test_help_names_every_default(capsys, command, option) -> None:
    text = help_text(capsys, *command)
    # The option's entry runs to the next option.
    entry = re.search(rf"^  {option}\b.*?(?=^  -|\Z)", text, re.MULTILINE | re.DOTALL)
    assert entry is not None and "default" in entry.group(0), text


def test_eval_names_its_config_file_as_the_other_commands_do(capsys) -> None:
    assert "--config FILE" in help_text(capsys, "eval")


def test_index_layout_estimates_read_as_counts() -> None:
    # k = 12 at a million articles: ~64,209 candidates, once printed as ~64209.0.
    described = choose_layout(12, 10**6).describe()
    assert "~64,209 candidates/query" in described, described


def test_sample_feeds_of_two_seeds_share_no_id() -> None:
    ids = [{m["id"] for m in generate_feed(40, seed) if "id" in m} for seed in (7, 8)]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    again = {m["id"] for m in generate_feed(40, 7) if "id" in m}
    assert again == ids[0]


def test_check_rejections_name_the_line_and_the_offset(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    good = {"id": "a", "title": "Harbour bridge opens", "content": "The bridge opened today."}
    feed.write_text(json.dumps(good) + "\n{not json\n")
    done = subprocess.run(
        [NEWSDEDUP, "check", str(feed), "--dlq", str(tmp_path / "dlq.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout.splitlines()[0])
    assert decision["source"]["offset"] == 0
    (rejected,) = [json.loads(line) for line in (tmp_path / "dlq.jsonl").read_text().splitlines()]
    assert (rejected["line"], rejected["offset"]) == (2, 1)
    done = subprocess.run(
        [NEWSDEDUP, "check", str(feed)], capture_output=True, text=True, timeout=120
    )
    assert "feed.jsonl:2 (offset 1): rejected" in done.stderr


def test_throughput_is_the_rate_of_the_work_not_of_the_interval(caplog) -> None:
    service = all_service(load_config(environ={}))
    now = time.monotonic()
    report = service._report
    report._last_throughput_log = now - 30
    report._decided_since_log = 1000
    report._busy_since_log = 2.0
    with caplog.at_level(logging.INFO, logger="newsdedup.service"):
        report.log_throughput(now)
    (record,) = [r for r in caplog.records if r.getMessage() == "throughput"]
    assert record.fields["per_second"] == 500.0
    assert record.fields["busy_s"] == 2.0 and record.fields["interval_s"] == 30.0
