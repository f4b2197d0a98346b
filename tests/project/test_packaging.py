"""The project installs as a `newsdedup` command, and the Docker build context has what it needs."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_console_script_answers_help() -> None:
    # Not resolved: sys.executable is the venv's python symlink, next to the installed script.
    newsdedup = Path(sys.executable).parent / "newsdedup"

    result = subprocess.run(
        [str(newsdedup), "--help"], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert "usage: newsdedup" in result.stdout


def test_every_dockerfile_copy_source_exists_and_reaches_the_build_context() -> None:
    ignore = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copies = [
        line.split()[1:-1]
        for line in (REPO_ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ")
    ]
    sources = [source for sources in copies for source in sources]

    assert sources, "the Dockerfile copies nothing"
    for source in sources:
        assert (REPO_ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
        assert _reaches_context(source.rstrip("/"), ignore), f".dockerignore excludes {source}"


def _reaches_context(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins, `!` re-includes; parents count too."""
    included = True
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        if any(fnmatch.fnmatch(candidate, pattern) for candidate in candidates):
            included = negated
    return included
