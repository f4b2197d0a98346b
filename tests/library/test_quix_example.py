"""The Quix Streams example (examples/quix/) against the real broker: its decisions, latest per
article id, are `newsdedup check`'s on the same articles, corrections included.

quixstreams caps confluent-kafka below the project's lock, so the example runs in a venv of its
own: examples/quix/requirements.lock plus this checkout's newsdedup, kept in pytest's cache."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import venv
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
from checking import run_check
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from service_support import produce, read_all

from consumer.corpus import iter_jsonl, shared_data_dir
from consumer.timetext import parse_event_time_ms

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "quix"
LOCK = EXAMPLE / "requirements.lock"
COMPARED = ("decision", "cluster_id", "matched_id", "distance", "late")
TOOLCHAIN = ("cargo", "rustc")
SCHEMA = json.loads((REPO_ROOT / "config/schemas/decision.schema.json").read_text())


def test_the_example_lock_pins_newsdedup_s_dependencies_with_hashes() -> None:
    # newsdedup goes in with --no-deps: the lock alone must satisfy what it requires.
    entries = re.split(r"\n(?=[a-z0-9])", LOCK.read_text().split("\n", 4)[4])
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", "\n".join(entries), re.MULTILINE))
    assert len(pins) == len(entries)
    assert all("--hash=sha256:" in e for e in entries)
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        version = pins.get(canonicalize_name(requirement.name))
        assert version is not None and requirement.specifier.contains(version), (
            f"{LOCK.name} pins {requirement.name}=={version}, outside {requirement}: "
            "run python examples/quix/lock.py"
        )
    assert "quixstreams" in pins and "newsdedup" not in pins


@pytest.fixture(scope="session")
def example_python(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The venv's python. Built once per lock, Python and checkout (20-50 s); the editable
    install reads this checkout's code, so a code change needs no rebuild."""
    key = hashlib.sha256(
        b"\0".join(
            [
                LOCK.read_bytes(),
                (REPO_ROOT / "pyproject.toml").read_bytes(),
                sys.version.encode(),
                str(REPO_ROOT).encode(),
            ]
        )
    ).hexdigest()[:16]
    cache = getattr(request.config, "cache", None)
    parent = cache.mkdir("quix-example") if cache else tmp_path_factory.mktemp("quix-example")
    root = parent / f"venv-{key}"
    python = root / "bin" / "python"
    done = root / "complete"  # written last: a venv whose build was cut short is rebuilt
    if not done.exists():
        for old in parent.glob("venv-*"):
            shutil.rmtree(old)
        venv.create(root, with_pip=True)
        pip = [python, "-m", "pip", "--disable-pip-version-check", "--quiet", "install"]
        env = _without_toolchain(_clean_env())
        _run([*pip, "--require-hashes", "-r", EXAMPLE / "requirements.lock"], env)
        # Without cargo on the PATH the editable install builds nothing into the checkout; at
        # run time newsdedup loads the kernels `make venv` built there, or runs the
        # pure-Python reference code (the same decisions) when there are none. Its build
        # requirements (pyproject.toml's [build-system]) come from PyPI, as for any install
        # from source.
        _run([*pip, "--no-deps", "--editable", REPO_ROOT], env)
        done.touch()
    return python


def _clean_env() -> dict[str, str]:
    """This environment without what would point the venv's python at another one."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


def _without_toolchain(env: dict[str, str]) -> dict[str, str]:
    kept = [
        d
        for d in env.get("PATH", "").split(os.pathsep)
        if d and not any((Path(d) / tool).exists() for tool in TOOLCHAIN)
    ]
    return {**env, "PATH": os.pathsep.join(kept)}


def _run(command: list, env: dict[str, str]) -> None:
    result = subprocess.run(
        [str(part) for part in command],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"


def _feed() -> list[dict]:
    """Real articles in publish order (English, then Chinese with many near-duplicates), then
    a copy and, behind it, its original published an hour before: within `check`'s reorder
    window, so `check` decides the original first, and the example corrects the copy."""
    articles = []
    for name in ("en_reuters21578", "zh_hkcnews_2017_2022"):
        raw = iter_jsonl(shared_data_dir() / f"{name}.jsonl.gz", 300)
        dated = [a for a in raw if a.get("published_at")]
        articles += sorted(dated, key=lambda a: parse_event_time_ms(a["published_at"]))
    newest = parse_event_time_ms(articles[-1]["published_at"])
    at = datetime.fromtimestamp(newest / 1000, UTC) + timedelta(days=1)
    text = {
        "title": "Ferry service to the outer islands resumes after the typhoon",
        "content": "The ferry operator said on Tuesday that crossings to the outer islands "
        "would resume at dawn, after the typhoon damaged two piers and a fuel depot. "
        "Engineers inspected the hulls overnight and found no structural damage.",
    }
    copy = {**text, "id": "late-copy", "published_at": at.isoformat()}
    original = {
        **text,
        "id": "early-original",
        "published_at": (at - timedelta(hours=1)).isoformat(),
    }
    return [*articles, copy, original]


def _latest(decisions: list[dict]) -> dict[str, tuple]:
    return {d["id"]: tuple(d.get(k) for k in COMPARED) for d in decisions}


class _App:
    """The example running; what read_all asks of a process to fail at once when it exits."""

    def __init__(self, command: list, env: dict[str, str], cwd: Path) -> None:
        self.log_path = cwd / "app.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [str(p) for p in command], env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT
            )

    def running(self) -> bool:
        return self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.mark.kafka
@pytest.mark.slow
def test_the_quix_example_decides_as_check_does(
    example_python: Path, kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    articles = _feed()
    expected = _latest(run_check(tmp_path, articles))
    # One partition: the articles reach the example in the order they were produced.
    topics = {"INPUT_TOPIC": new_topic("articles"), "OUTPUT_TOPIC": new_topic("decisions")}
    produce(kafka_bootstrap, topics["INPUT_TOPIC"], articles)
    env = {
        **_clean_env(),
        **topics,
        "BROKER_ADDRESS": kafka_bootstrap,
        "CONSUMER_GROUP": "quix-example",
        "INDEX_DIR": str(tmp_path / "index"),
    }
    # Run from a directory of its own: Quix keeps its state directory in the working one.
    where = tmp_path / "app"
    where.mkdir()
    app = _App([example_python, EXAMPLE / "app.py"], env, where)
    try:
        # Every article once, and the copy a second time, corrected.
        records = read_all(
            kafka_bootstrap,
            topics["OUTPUT_TOPIC"],
            expected=len(articles) + 1,
            timeout=120,
            service=app,
        )
        app.process.send_signal(signal.SIGTERM)
        assert app.process.wait(timeout=30) == 0, app.log()[-3000:]
    finally:
        if app.running():
            app.process.kill()
            app.process.wait()

    decisions = [r.json() for r in records]
    assert [r.key.decode() for r in records] == [d["id"] for d in decisions]
    for d in decisions:
        jsonschema.validate(d, SCHEMA)
    # Each decision names the input message that made it: the copy's correction, the original's.
    offsets = [d["source"]["offset"] for d in decisions]
    assert offsets == [*range(len(articles)), len(articles) - 1]
    assert {d["source"]["topic"] for d in decisions} == {topics["INPUT_TOPIC"]}
    assert len(decisions) == len(articles) + 1, "an article decided twice, or one missing"
    got = _latest(decisions)
    assert got.keys() == expected.keys()
    differ = [i for i in got if got[i] != expected[i]]
    assert not differ, f"{len(differ)} differ, e.g. {[(got[i], expected[i]) for i in differ[:3]]}"
    assert sum(v[0] != "unique" for v in got.values()) > 50
    assert [d["decision"] for d in decisions if d["id"] == "late-copy"] == ["unique", "duplicate"]
    assert got["late-copy"][2] == "early-original"
