"""The dependency lock stays current with pyproject.toml, and the audit that `make test` runs
fails on fixable vulnerabilities only, and never because the advisory data is unreachable."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
AUDIT_SCRIPT = REPO_ROOT / "scripts" / "audit"

# scripts/audit has no .py suffix (it is a command), so it is loaded by path.
_loader = SourceFileLoader("newsdedup_audit", str(AUDIT_SCRIPT))
audit = importlib.util.module_from_spec(importlib.util.spec_from_loader(_loader.name, _loader))
sys.modules[_loader.name] = audit  # dataclasses look their module up there
_loader.exec_module(audit)


def _pins(lock: Path) -> dict[str, str]:
    text = lock.read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)", text, re.MULTILINE))
    return {canonicalize_name(name): version for name, version in pins.items()}


def _requirements(*extras: str) -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize(
    ("lock", "extras"),
    [("requirements.lock", ()), ("requirements-dev.lock", ("test", "eval"))],
)
def test_the_lock_pins_every_dependency_of_pyproject(lock: str, extras: tuple[str, ...]) -> None:
    pins = _pins(REPO_ROOT / lock)
    environment = {**default_environment(), "extra": ""}
    for requirement in _requirements(*extras):
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in {lock}: run 'make lock'"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{lock} pins {name}=={pins[name]}, outside {requirement}: run 'make lock'"
        )


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-dev.lock"])
def test_every_pin_carries_hashes(lock: str) -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", (REPO_ROOT / lock).read_text().split("\n", 3)[3])
    assert entries
    for entry in entries:
        assert "--hash=sha256:" in entry, f"{entry.split()[0]} in {lock} has no hash"


def test_the_runtime_lock_is_the_dev_lock_at_the_same_versions() -> None:
    runtime = _pins(REPO_ROOT / "requirements.lock")
    dev = _pins(REPO_ROOT / "requirements-dev.lock")
    assert {name: dev.get(name) for name in runtime} == runtime


# -- the audit's verdicts --------------------------------------------------------------------


def _report(*deps: dict) -> dict:
    return {"dependencies": list(deps), "fixes": []}


def test_a_vulnerability_with_a_fix_fails_the_build() -> None:
    verdict = audit.judge(
        _report(
            {"name": "urllib3", "version": "1.26.5", "vulns": [
                {"id": "PYSEC-2023-1", "fix_versions": ["1.26.18", "2.0.7"]},
            ]},
            {"name": "mmh3", "version": "5.3.1", "vulns": []},
        ),
        1,
        "",
        ["urllib3==1.26.5", "mmh3==5.3.1"],
    )  # fmt: skip

    assert verdict.fixable == ["urllib3==1.26.5: PYSEC-2023-1 (fixed in 1.26.18, 2.0.7)"]
    assert verdict.audited == 2
    assert verdict.exit_code(strict=False) == 1


def test_a_vulnerability_without_a_fix_is_only_a_warning() -> None:
    verdict = audit.judge(
        _report({"name": "x", "version": "1", "vulns": [{"id": "GHSA-1", "fix_versions": []}]}),
        1,
        "",
        ["x==1"],
    )

    assert verdict.unfixable == ["x==1: GHSA-1"]
    assert verdict.exit_code(strict=False) == 0


def test_unreachable_advisory_data_passes_unless_strict() -> None:
    stderr = (
        "Traceback (most recent call last):\n  ...\n"
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='pypi.org', port=443)\n"
    )
    verdict = audit.judge(None, 1, stderr, ["a==1", "b==2"])

    assert verdict.unaudited == ["a==1", "b==2"]
    assert verdict.exit_code(strict=False) == 0
    assert verdict.exit_code(strict=True) == 1


def test_packages_the_service_did_not_know_count_as_not_audited() -> None:
    verdict = audit.judge(
        _report({"name": "a", "skip_reason": "Dependency not found on PyPI"}), 0, "", ["a==1"]
    )

    assert verdict.audited == 0 and len(verdict.unaudited) == 1
    assert verdict.exit_code(strict=False) == 0
    assert verdict.exit_code(strict=True) == 1


def test_any_other_pip_audit_failure_fails_the_build() -> None:
    verdict = audit.judge(None, 2, "pip-audit: error: unrecognized arguments: --bogus\n", [])

    assert verdict.error and verdict.exit_code(strict=False) == 1


def test_the_audit_offline_warns_and_passes(tmp_path: Path) -> None:
    # A proxy on a port nothing listens on: pip-audit reaches no advisory data at all, for real.
    lock = tmp_path / "one.lock"
    lock.write_text(
        "urllib3==1.26.5 \\\n"
        "    --hash=sha256:753a0374df26658f99d826cfe40394a686d05985786d946fbe4165b5148f5a7c\n"
    )
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")

    def run(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(AUDIT_SCRIPT), str(lock)],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    relaxed = run()
    assert relaxed.returncode == 0, relaxed.stderr
    assert "1 of 1 locked packages could not be audited" in relaxed.stderr
    strict = run(NEWSDEDUP_AUDIT_STRICT="1")
    assert strict.returncode == 1, strict.stderr
