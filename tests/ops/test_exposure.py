"""What the service exposes on the machine: its listening sockets, its state directory's
permissions, the user its container runs as, and credentials in its error messages."""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from service_support import NEWSDEDUP, ServiceProcess, Topics, family_tree, free_port, wait_until

from consumer.config import IndexConfig
from consumer.scaleout.domains import DomainStores
from consumer.stream.clients import redact
from consumer.stream.state import open_index

REPO_ROOT = Path(__file__).resolve().parents[2]
TCP_LISTEN = "0A"
UNIX_ACCEPTING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix


# -- the state directory --------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_a_new_state_directory_is_owner_only(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "var" / "newsdedup" / "state"
    previous = os.umask(umask)
    try:
        with open_index(IndexConfig(path=str(path))):
            pass
    finally:
        os.umask(previous)

    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert (path / "CURRENT").exists(), "the index was not created inside it"


def test_the_decide_roles_directories_are_owner_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "state"
    previous = os.umask(0o022)
    try:
        with caplog.at_level(logging.WARNING), DomainStores(IndexConfig(path=str(root))) as stores:
            stores.store(3, "zh")
    finally:
        os.umask(previous)
    for directory in (root, root / "partition-3", root / "partition-3" / "domain=zh"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert not any("readable by other users" in r.getMessage() for r in caplog.records)


def test_an_existing_open_state_directory_is_kept_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state"
    path.mkdir()
    path.chmod(0o755)

    with caplog.at_level(logging.WARNING), open_index(IndexConfig(path=str(path))):
        pass

    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert any("readable by other users" in r.getMessage() for r in caplog.records)


# -- the container ---------------------------------------------------------------------------


def test_the_container_runs_as_a_non_root_user() -> None:
    lines = (REPO_ROOT / "Dockerfile").read_text().splitlines()
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users, "the Dockerfile never sets USER: the container would run as root"
    user, _, group = users[-1].partition(":")
    # Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
    assert user.isdigit() and int(user) != 0, users[-1]
    assert not group or (group.isdigit() and int(group) != 0), users[-1]
    assert int(user) == 10001, "README and docker-compose.yml promise uid 10001"
    # Nothing after the last USER switches back.
    last_user = max(i for i, line in enumerate(lines) if line.startswith("USER "))
    assert not any(line.startswith("RUN ") for line in lines[last_user:])


# -- listening sockets -----------------------------------------------------------------------


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    return inodes


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    if len(host) == 8:  # IPv4, little-endian
        ip = ".".join(str(int(host[i : i + 2], 16)) for i in (6, 4, 2, 0))
    else:
        ip = f"[{host}]"  # IPv6: any listener at all is a finding; its spelling does not matter
    return f"{ip}:{int(port, 16)}"


def listening_sockets(pid: int) -> list[str]:
    """Every TCP listener, bound UDP socket and accepting Unix socket of `pid`'s process tree."""
    found = []
    for process in family_tree(pid):
        inodes = _socket_inodes(process)
        for proto in ("tcp", "tcp6", "udp", "udp6"):
            for line in Path(f"/proc/{process}/net/{proto}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes and (proto.startswith("udp") or fields[3] == TCP_LISTEN):
                    found.append(f"{proto} {_address(fields[1])} (pid {process})")
        for line in Path(f"/proc/{process}/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[6] in inodes and int(fields[3], 16) & UNIX_ACCEPTING:
                found.append(f"unix {fields[7] if len(fields) > 7 else '(unnamed)'}")
    return found


@pytest.mark.kafka
@pytest.mark.slow
def test_the_service_listens_only_on_the_metrics_address(kafka_bootstrap, new_topic, tmp_path):
    name = new_topic("exposure")
    topics = Topics(name, f"{name}.decisions", f"{name}.dlq")
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "service.log",
        group_id=f"g-{uuid.uuid4().hex[:8]}",
    )
    # 127.0.0.2 is loopback too, but a different address from the 127.0.0.1 the default
    # helpers use: a server that ignored the option would not be found there.
    port = free_port()
    service.env["NEWSDEDUP_METRICS_LISTEN"] = f"127.0.0.2:{port}"
    with service:
        pid = service.process.pid
        wait_until(lambda: _ready_on(f"127.0.0.2:{port}"), timeout=120, what="/readyz")
        sockets = listening_sockets(pid)
        assert service.stop() == 0

    assert sockets == [f"tcp 127.0.0.2:{port} (pid {pid})"]


def _ready_on(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


# -- credentials in error messages -----------------------------------------------------------


def _newsdedup(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NEWSDEDUP, *args],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_misspelt_client_key_stops_the_start_in_one_line(tmp_path: Path) -> None:
    result = _newsdedup(
        ["run"],
        NEWSDEDUP_KAFKA_CLIENT_SASL_PASSWORDD="s3cret-value-1",
        NEWSDEDUP_INDEX_PATH=str(tmp_path / "state"),
        NEWSDEDUP_METRICS_LISTEN=f"127.0.0.1:{free_port()}",
    )

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        'newsdedup: error: option [kafka.client]: No such configuration property: "sasl.passwordd"'
    ]
    assert not (tmp_path / "state").exists(), "nothing should start before the options are valid"


def test_a_refused_client_value_never_echoes_a_credential() -> None:
    # A password pasted into the wrong key: librdkafka quotes the bad value back.
    secret = f"s3cret-{uuid.uuid4().hex}"
    result = _newsdedup(
        ["produce", "-", "--topic", "t"],
        NEWSDEDUP_KAFKA_CLIENT_SECURITY_PROTOCOL="SASL_SSL",
        NEWSDEDUP_KAFKA_CLIENT_SASL_MECHANISM=secret,
        NEWSDEDUP_KAFKA_CLIENT_SASL_PASSWORD=secret,
    )

    assert result.returncode == 2
    assert "Unsupported SASL mechanism: ***" in result.stderr
    assert secret not in result.stdout + result.stderr


def test_redact_masks_every_credential_value() -> None:
    settings = {
        "sasl.password": "pw-1",
        "ssl.key.password": "pw-2",
        "sasl.oauthbearer.client.secret": "pw-3",
        "sasl.username": "alice",
    }
    text = "pw-1 pw-2 pw-3 alice"

    assert redact(text, settings) == "*** *** *** alice"
