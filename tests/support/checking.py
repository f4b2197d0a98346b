"""`newsdedup check` run on a list of articles in a subprocess, and real articles to feed it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.evaluation import truth

NEWSDEDUP = [sys.executable, "-m", "consumer.cli"]


def run_check(tmp_path: Path, articles: list[dict], **env: str) -> list[dict]:
    feed = tmp_path / "in.jsonl"
    out = tmp_path / "out.jsonl"
    feed.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in articles))
    state = tmp_path / f"state-{len(list(tmp_path.iterdir()))}"
    environ = {**os.environ, "NEWSDEDUP_SERVICE_WORKERS": "1", **env}
    result = subprocess.run(
        [*NEWSDEDUP, "check", str(feed), "-o", str(out), "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=600,
        env=environ,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def corpus(name: str, n: int, min_chars: int = 300) -> list[dict]:
    path = shared_data_dir() / f"{name}.jsonl.gz"
    out = []
    for a in iter_jsonl(path, n * 3):
        if len(a.get("content") or "") >= min_chars:
            # One event time: the corpus is not in publish order, and the window would make
            # articles more than 72 h older than the newest late (searched, never inserted).
            out.append(
                {
                    "id": a["id"],
                    "title": a["title"],
                    "content": a["content"],
                    "published_at": "2026-11-22T10:00:00Z",
                }
            )
        if len(out) == n:
            break
    return out


def text_of(a: dict) -> str:
    return truth.article_text(a["title"], a["content"])
