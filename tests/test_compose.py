"""docker-compose.yml validates with docker-compose, which needs no Docker engine for that."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _compose(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("docker-compose") is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing in CI; `make system-deps` installs it")
        pytest.skip("docker-compose is not installed (`make system-deps` installs it)")
    return subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_compose_file_is_valid() -> None:
    result = _compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_the_stack_has_kafka_topics_and_the_service_with_named_volumes() -> None:
    services = _compose("config", "--services")
    volumes = _compose("config", "--volumes")

    assert {"kafka", "create-topics", "newsdedup"} <= set(services.stdout.split())
    assert {"kafka-data", "newsdedup-index"} <= set(volumes.stdout.split())
