"""newsdedup ships as one wheel holding both native kernels, which installs and runs where
there is no Rust toolchain; installed from source without cargo it runs the pure-Python
reference code instead, with the same decisions and one warning. One version number."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from consumer import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]
DEV_NEWSDEDUP = Path(sys.executable).parent / "newsdedup"
TOOLCHAIN = ("cargo", "rustc")
WARNING = "newsdedup: warning: "


def _run(
    command: list, env: dict[str, str] | None = None, timeout: int = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _decisions(path: Path) -> list[dict]:
    """Every decision but its processing time, the one field that differs between runs."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "processed_at"} for line in lines]


def test_the_version_is_written_once_and_printed_with_the_kernels_status() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "consumer.__version__"}

    shown = _run([DEV_NEWSDEDUP, "--version"], timeout=60)

    # The development install (make venv) always has both kernels.
    assert shown.stderr == ""
    assert shown.stdout == f"newsdedup {__version__} (native kernels: fingerprint yes, probe yes)\n"


# -- the wheel, and a source install, in a fresh venv on a PATH without cargo ---------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once by what `make wheel` runs; cargo reuses consumer/native/target and
    indexstore/native/target, so a rebuild costs seconds, a first build a few minutes."""
    out = tmp_path_factory.mktemp("dist")
    printed = _run([sys.executable, REPO_ROOT / "scripts" / "wheel", out], timeout=900).stdout
    (built,) = out.glob("*.whl")
    assert printed == f"{built}\n"
    return built


@pytest.fixture(scope="module")
def without_cargo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv holding the runtime lock, and an environment whose PATH has that venv's
    bin and no directory with cargo or rustc (so setuptools-rust finds no toolchain)."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, with_pip=True)
    bin_dir = root / "bin"
    kept = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any((Path(d) / tool).exists() for tool in TOOLCHAIN)
    ]
    path = os.pathsep.join([str(bin_dir), *kept])
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "VIRTUAL_ENV", "CARGO", "RUSTC"}
        and not k.startswith(("CARGO_", "RUSTUP_"))
    }
    env["PATH"] = path
    assert all(shutil.which(tool, path=path) is None for tool in TOOLCHAIN)
    pip = [bin_dir / "python", "-m", "pip", "--disable-pip-version-check", "--quiet"]
    _run([*pip, "install", "--require-hashes", "-r", REPO_ROOT / "requirements.lock"], env)
    return bin_dir, env


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """A generated feed, and the decisions the development install (native kernels) makes."""
    where = tmp_path_factory.mktemp("feed")
    articles, decided = where / "feed.jsonl", where / "decisions.jsonl"
    _run([DEV_NEWSDEDUP, "sample-feed", "--start", "2026-01-01T00:00:00Z", "-o", articles])
    _run([DEV_NEWSDEDUP, "check", articles, "-o", decided])
    return articles, _decisions(decided)


def _install(bin_dir: Path, env: dict[str, str], target: Path) -> None:
    pip = [bin_dir / "python", "-m", "pip", "--disable-pip-version-check", "--quiet"]
    _run([*pip, "install", "--no-deps", "--force-reinstall", target], env)


def _check(bin_dir: Path, env: dict[str, str], articles: Path) -> tuple[list[dict], list[str]]:
    """`newsdedup check` from the venv: its decisions and its warning lines."""
    decided = articles.with_name(f"decisions-{bin_dir.parent.name}.jsonl")
    stderr = _run([bin_dir / "newsdedup", "check", articles, "-o", decided], env).stderr
    warnings = [line for line in stderr.splitlines() if line.startswith(WARNING)]
    return _decisions(decided), warnings


@pytest.mark.slow
def test_the_wheel_holds_both_kernels_and_checks_a_feed_without_cargo(
    wheel: Path, without_cargo: tuple[Path, dict[str, str]], feed: tuple[Path, list[dict]]
) -> None:
    bin_dir, env = without_cargo
    articles, expected = feed
    tag = r"cp3\d+-cp3\d+-manylinux_2_\d+_\w+"
    assert re.fullmatch(rf"newsdedup-{re.escape(__version__)}-{tag}\.whl", wheel.name), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.fullmatch(r"consumer/_fastfp\..*\.so", n) for n in names)
    assert any(re.fullmatch(r"indexstore/_probe\..*\.so", n) for n in names)

    _install(bin_dir, env, wheel)
    shown = _run([bin_dir / "newsdedup", "--version"], env)
    decisions, warnings = _check(bin_dir, env, articles)

    assert shown.stdout == f"newsdedup {__version__} (native kernels: fingerprint yes, probe yes)\n"
    assert warnings == []
    assert len(decisions) == len(expected) > 500
    assert decisions == expected
    assert _library_decisions(bin_dir, env, articles) == _latest(expected)


# The library API from the installed wheel: the feed's valid articles in one call (the feed
# holds a few that `check` rejects, which the library refuses), every decision printed.
LIBRARY_RUN = """
import json, sys
from newsdedup import Deduplicator, InvalidArticle
articles = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
with Deduplicator(sys.argv[2]) as dedup:
    while True:
        try:
            decided = dedup.decide_many(articles)
            break
        except InvalidArticle as refused:
            del articles[refused.index]
for decision in [*decided, *decided.corrections]:
    print(json.dumps(decision.to_dict()))
"""


def _library_decisions(bin_dir: Path, env: dict[str, str], articles: Path) -> dict[str, tuple]:
    # Run elsewhere than the checkout, whose packages would shadow the wheel's.
    where = articles.parent
    out = _run(
        [bin_dir / "python", "-c", LIBRARY_RUN, articles, where / "library-ix"], env, cwd=where
    )
    return _latest([json.loads(line) for line in out.stdout.splitlines()])


def _latest(decisions: list[dict]) -> dict[str, tuple]:
    """Each article's latest decision, as a reader keeping the latest per id has it."""
    fields = ("decision", "cluster_id", "matched_id", "distance", "late")
    return {d["id"]: tuple(d.get(k) for k in fields) for d in decisions}


@pytest.mark.slow
def test_a_source_install_without_cargo_runs_the_reference_code_with_one_warning(
    tmp_path: Path, without_cargo: tuple[Path, dict[str, str]], feed: tuple[Path, list[dict]]
) -> None:
    bin_dir, env = without_cargo
    articles, expected = feed
    # What an sdist holds: the tracked files, none of the kernels built in this checkout.
    source = tmp_path / "newsdedup"
    tracked = _run(["git", "-C", REPO_ROOT, "ls-files", "-z"]).stdout.split("\0")
    for name in filter(None, tracked):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, source / name)

    _install(bin_dir, env, source)
    shown = _run([bin_dir / "newsdedup", "--version"], env)
    decisions, warnings = _check(bin_dir, env, articles)

    assert shown.stdout == f"newsdedup {__version__} (native kernels: fingerprint no, probe no)\n"
    assert len(warnings) == 1, warnings
    assert "(fingerprint, probe)" in warnings[0]
    assert "slower" in warnings[0]
    assert decisions == expected
