"""Runs newsdedup itself on the feed, through its public `check` command only.

The contract used: `check IN.jsonl -o OUT.jsonl --state DIR --dlq DLQ.jsonl
[--config FILE]` writes one decision JSON line per input line, in input order, with at least
`id`, `decision` and `matched_id` (and `cluster_id`, read where present), except for lines it
rejects (no text to fingerprint, say), which it reports in DLQ.jsonl by `line` number instead.
A rejected article is decided nothing: it counts as not flagged, and is a cluster of its own.
Going through the command keeps the evaluation independent of the internals and measures what
a user gets, start-up included.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from consumer.evaluation.feed import FeedArticle
from consumer.evaluation.runs import SystemAnswer, SystemRun
from consumer.records import DecisionKind

# The run whose window holds the whole feed (`whole_feed_window`).
WHOLE_FEED_SYSTEM = "newsdedup-whole"

# Tests replace this with a stand-in script that honours the same contract.
CHECK_COMMAND: tuple[str, ...] = (sys.executable, "-m", "consumer.cli", "check")


class ContractError(Exception):
    """The check command's output does not follow the decision contract."""


def decision_from_record(record: object) -> SystemAnswer:
    """One decision (a `check` line or an output topic record, parsed), checked against the
    contract."""
    try:
        verdict = DecisionKind(record["decision"])  # type: ignore[index]
        article_id = record["id"]  # type: ignore[index]
        matched = record.get("matched_id")  # type: ignore[union-attr]
        cluster = record.get("cluster_id")  # type: ignore[union-attr]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ContractError(repr(e)) from None
    if not isinstance(article_id, str):
        raise ContractError(f"id {article_id!r} is not a string")
    if verdict is not DecisionKind.UNIQUE and not isinstance(matched, str):
        raise ContractError(f"{verdict} without a matched_id")
    return SystemAnswer(
        article_id,
        verdict,
        matched if isinstance(matched, str) else None,
        cluster if isinstance(cluster, str) else None,
    )


def parse_decisions(
    lines: Sequence[str], articles: Sequence[FeedArticle]
) -> tuple[SystemAnswer, ...]:
    """Decisions in feed order, checked against the contract line by line. A line marked
    `"correction": true` replaces the decision of its id (the latest decision per id counts,
    as for a reader of the output topic)."""
    corrections = [(n, ln) for n, ln in enumerate(lines, 1) if _is_correction(ln)]
    if corrections:
        lines = [ln for ln in lines if not _is_correction(ln)]
    decisions = _parse_in_order(lines, articles)
    if not corrections:
        return decisions
    position = {d.id: i for i, d in enumerate(decisions)}
    updated = list(decisions)
    for n, line in corrections:
        try:
            decision = decision_from_record(json.loads(line))
        except ContractError as e:
            raise ContractError(f"decision line {n}: {e}") from None
        if decision.id not in position:
            raise ContractError(f"decision line {n} corrects {decision.id!r}, never decided")
        updated[position[decision.id]] = decision
    return tuple(updated)


def _is_correction(line: str) -> bool:
    try:
        return json.loads(line).get("correction") is True
    except (json.JSONDecodeError, AttributeError):
        return False


def _parse_in_order(
    lines: Sequence[str], articles: Sequence[FeedArticle]
) -> tuple[SystemAnswer, ...]:
    if len(lines) != len(articles):
        raise ContractError(f"{len(lines)} decision lines for {len(articles)} input articles")
    decisions = []
    for n, (line, article) in enumerate(zip(lines, articles, strict=True), 1):
        try:
            decision = decision_from_record(json.loads(line))
        except json.JSONDecodeError as e:
            raise ContractError(f"decision line {n}: {e!r}") from None
        except ContractError as e:
            raise ContractError(f"decision line {n}: {e}") from None
        if decision.id != article.id:
            raise ContractError(f"decision line {n} is for {decision.id!r}, not {article.id!r}")
        decisions.append(decision)
    return tuple(decisions)


def _rejected_lines(path: Path) -> set[int]:
    if not path.exists():
        return set()
    with path.open(encoding="utf-8") as f:
        return {int(json.loads(line)["line"]) for line in f if line.strip()}


def whole_feed_window(articles: Sequence[FeedArticle]) -> dict[str, str]:
    """Environment overrides (they win over --config) giving `check` a window that holds the
    whole feed, as the baselines, which never forget: as many segments as the default
    window has (72 of 1 h), and the table layout chosen for the feed's size."""
    times = [a.published_at for a in articles]
    hours = math.ceil((max(times) - min(times)).total_seconds() / 3600) + 1
    return {
        "NEWSDEDUP_INDEX_RETENTION": f"{hours}h",
        "NEWSDEDUP_INDEX_SEGMENT": f"{-(-hours // 72)}h",
        "NEWSDEDUP_INDEX_EXPECTED_ARTICLES": str(len(articles)),
    }


def warm_up(config: Path | None) -> None:
    """Build what a worker process builds once per machine and then reads from the table
    cache (consumer/fingerprint/tablecache.py), so the timed run starts as it does wherever
    newsdedup has run before; a first start on a machine is ~0.25 s slower per worker."""
    from consumer.config import load_config
    from consumer.fingerprint.fingerprinter import Fingerprinter
    from consumer.stream.workers import fingerprint_options

    Fingerprinter(fingerprint_options(load_config(str(config) if config else None).fingerprint))


def run_newsdedup_check(
    articles: Sequence[FeedArticle],
    config: Path | None = None,
    *,
    system: str = "newsdedup",
    environment: dict[str, str] | None = None,
) -> SystemRun:
    """newsdedup's decisions on `articles`, from a fresh state directory; never raises for a
    failing command, so the baselines are still reported: the run carries the error instead.
    `environment` is added to this process's for the command."""
    with tempfile.TemporaryDirectory(prefix="newsdedup-eval-") as tmp:
        feed_path, out_path, dlq_path, state = (
            Path(tmp, "feed.jsonl"),
            Path(tmp, "out.jsonl"),
            Path(tmp, "dlq.jsonl"),
            Path(tmp, "state"),
        )
        with feed_path.open("w", encoding="utf-8") as f:
            for article in articles:
                f.write(json.dumps(article.to_message(), ensure_ascii=False) + "\n")
        command = [
            *CHECK_COMMAND,
            str(feed_path),
            *("-o", str(out_path), "--state", str(state), "--dlq", str(dlq_path)),
        ]
        if config is not None:
            command += ["--config", str(config)]
        started = time.perf_counter()
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **(environment or {})},
        )
        seconds = time.perf_counter() - started
        # The command and every process it waited for, start-up included, as `seconds`.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_seconds = (children.ru_utime + children.ru_stime) - (
            children_before.ru_utime + children_before.ru_stime
        )
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            return SystemRun(system, (), seconds, f"check exited {done.returncode}: {tail}")
        try:
            lines = out_path.read_text(encoding="utf-8").splitlines()
            rejected = _rejected_lines(dlq_path)
            decided = iter(
                parse_decisions(
                    [ln for ln in lines if ln.strip()],
                    [a for n, a in enumerate(articles, 1) if n not in rejected],
                )
            )
            decisions = tuple(
                SystemAnswer(a.id, DecisionKind.UNIQUE) if n in rejected else next(decided)
                for n, a in enumerate(articles, 1)
            )
        except (OSError, ValueError, KeyError, ContractError) as e:
            return SystemRun(system, (), seconds, f"check output unusable: {e}")
    return SystemRun(system, decisions, seconds, cpu_seconds=cpu_seconds)
