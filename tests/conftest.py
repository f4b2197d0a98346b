"""Fixtures shared by the whole suite.

Kafka: one real broker per test session, started on free ports through scripts/kafka-local
(`kafka_bootstrap`), and uniquely named topics on it (`new_topic`).
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

# The data path's records are built frozen in the tests (indexstore/value.py), here and in
# every process a test starts: code that assigns a field fails where a test reaches it. Set
# before any test module imports them.
os.environ["FREEZE_NEWSDEDUP_RECORDS"] = "1"

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_LOCAL = REPO_ROOT / "scripts" / "kafka-local"

# Cold JVM start plus format on a busy 2-core machine; the script's own budget is 90 s.
KAFKA_START_TIMEOUT_S = 150
KAFKA_STOP_TIMEOUT_S = 60


def free_ports(count: int) -> list[int]:
    """Ports the kernel reports free right now; held together so they are distinct."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


@dataclass(frozen=True, slots=True)
class LocalBroker:
    """One scripts/kafka-local broker: its ports and data dir, and the script run against it."""

    port: int
    controller_port: int
    data_dir: Path

    @classmethod
    def on_free_ports(cls, data_dir: Path) -> LocalBroker:
        port, controller_port = free_ports(2)
        return cls(port, controller_port, data_dir)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    def env(self, **overrides: str) -> dict[str, str]:
        return {
            **os.environ,
            "KAFKA_PORT": str(self.port),
            "KAFKA_CONTROLLER_PORT": str(self.controller_port),
            "KAFKA_DATA_DIR": str(self.data_dir),
            **overrides,
        }

    def run(
        self, command: str, *, timeout: float = KAFKA_START_TIMEOUT_S, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KAFKA_LOCAL), command],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self) -> str:
        """Start the broker and return the bootstrap address the script printed last."""
        result = self.run("start")
        if result.returncode != 0:
            raise RuntimeError(
                f"scripts/kafka-local start failed (exit {result.returncode}):\n{result.stderr}"
            )
        return result.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        self.run("stop", timeout=KAFKA_STOP_TIMEOUT_S)

    def freeze(self) -> None:
        """SIGSTOP the broker: it answers nothing, like a broker in a long pause, until
        `thaw`."""
        os.kill(self._pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)

    def _pid(self) -> int:
        return int((self.data_dir / "kafka.pid").read_text())


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of the session's broker; stopped at session end whatever happened."""
    broker = LocalBroker.on_free_ports(tmp_path_factory.mktemp("kafka"))
    try:
        yield broker.start()
    finally:
        broker.stop()


@pytest.fixture
def kafka_admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def new_topic(kafka_admin: AdminClient) -> Callable[..., str]:
    """`new_topic(name_prefix, partitions=1) -> name`: a fresh topic no other test touches."""

    def create(name_prefix: str, partitions: int = 1) -> str:
        name = f"{name_prefix}-{uuid.uuid4().hex[:10]}"
        futures = kafka_admin.create_topics([NewTopic(name, partitions, 1)])
        futures[name].result(timeout=30)
        _wait_for_leaders(kafka_admin, name, partitions)
        return name

    return create


def _wait_for_leaders(admin: AdminClient, topic: str, partitions: int) -> None:
    # create_topics returns once the controller has the topic; producing before every
    # partition has a leader would make the first send of a test wait on retries.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leader for every partition after 30 s")


@pytest.fixture
def kafka_local(tmp_path: Path) -> Iterator[LocalBroker]:
    """A second broker of a test's own (free ports, own data dir), stopped after the test.

    Only for tests of scripts/kafka-local itself and tests that stop or freeze their broker;
    everything else uses `kafka_bootstrap`.
    """
    broker = LocalBroker.on_free_ports(tmp_path / "kafka")
    try:
        yield broker
    finally:
        broker.stop()


# -- a filesystem of a test's own, to fill -------------------------------------------------


@dataclass(frozen=True, slots=True)
class SmallFilesystem:
    """A tmpfs of its own, so a test can fill a filesystem without touching anyone else's."""

    path: Path

    def fill(self, name: str = "filler") -> Path:
        """Write zeros until the filesystem refuses; returns the file to delete to free it."""
        filler = self.path / name
        chunk = bytes(1 << 20)
        with filler.open("wb", buffering=0) as f:
            while chunk:
                try:
                    f.write(chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    chunk = chunk[: len(chunk) // 2]
        return filler


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFilesystem]:
    """A 48 MiB tmpfs, unmounted after the test. Mounting needs root (CAP_SYS_ADMIN): without
    it the test is skipped, saying so."""
    mountpoint = tmp_path / "fs"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root (CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield SmallFilesystem(mountpoint)
    finally:
        subprocess.run(["umount", "--lazy", str(mountpoint)], check=True)


# -- fuzzing: how many inputs each fuzz test tried, printed at the end of the session ---------
# Kept in the test's report (user_properties), which a pytest-xdist worker sends to the
# process that prints the summary.

_FUZZ_INPUTS = "fuzz_inputs"


@pytest.fixture
def record_fuzz_inputs(request: pytest.FixtureRequest) -> Callable[[int], None]:
    """`record_fuzz_inputs(n)`: this test tried n inputs (shown in the session summary)."""
    return lambda count: request.node.user_properties.append((_FUZZ_INPUTS, count))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tried = [
        (report.nodeid, value)
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if report.when == "call"
        for name, value in report.user_properties
        if name == _FUZZ_INPUTS
    ]
    if tried:
        terminalreporter.section("fuzzing")
        for nodeid, count in tried:
            terminalreporter.write_line(f"{nodeid}: {count:,} inputs tried")
