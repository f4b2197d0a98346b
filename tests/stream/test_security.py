"""Security against a real broker that requires SASL over TLS, with a CA the test makes.

Right credentials (SCRAM-SHA-256 for the service, PLAIN for `produce`) decide a feed; wrong
ones end the process with one clear line and a non-zero exit, after a handful of attempts,
never a retry storm; and no password ever shows in a log, an error, /metrics or --help.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import LocalBroker
from secure_broker import SecureBroker, make_certificates, new_password, start_secure_broker
from service_support import NEWSDEDUP, ServiceProcess, Topics, read_all

from consumer.config import load_config
from consumer.roles.all import all_service
from consumer.stream.broker_errors import KafkaFatalError

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

# librdkafka reconnects about every 300 ms after a refused login (every 50 ms after a failed
# TLS handshake); the service must stop at the first refusal, with a few attempts in flight.
MAX_FAILED_LOGINS = 8
# 1-3 handshakes while the refused admin client is destroyed before the shutdown; 4-9 while it
# lived on through it (held by the frames in its error's traceback: 4 of 11 runs failed).
MAX_FAILED_HANDSHAKES = 5
REFUSAL_EXIT_BUDGET_S = 30


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """A broker of this module's own: SASL_SSL only, on its own ports and data dir."""
    directory = tmp_path_factory.mktemp("secure-kafka")
    broker = LocalBroker.on_free_ports(directory / "kafka")
    try:
        yield start_secure_broker(broker, directory)
    finally:
        # Stopped whatever happened, including a start that failed half-way.
        broker.stop()


@pytest.fixture
def topics(secure: SecureBroker) -> Topics:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    made = Topics(f"{name}.raw", f"{name}.decisions", f"{name}.dlq")
    admin = AdminClient(secure.admin_config())
    futures = admin.create_topics([NewTopic(made.input, 2, 1)])
    futures[made.input].result(timeout=30)
    return made


def _client_env(settings: dict[str, str]) -> dict[str, str]:
    """[kafka.client] as NEWSDEDUP_KAFKA_CLIENT_* variables (`.` written as `_`)."""
    return {f"kafka_client_{key.replace('.', '_')}": value for key, value in settings.items()}


def _toml_config(path: Path, bootstrap: str, client: dict[str, str]) -> Path:
    lines = ["[kafka]", f'bootstrap_servers = "{bootstrap}"', "", "[kafka.client]"]
    lines += [f'"{key}" = "{value}"' for key, value in client.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _failed_logins(secure: SecureBroker, kind: str = "") -> int:
    """Refusals in the broker log; `kind` narrows them: "SSL handshake failed", or
    "Authentication failed" for SASL."""
    lines = secure.broker.log_path.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if "Failed authentication" in line and kind in line)


def _assert_no_secret(secure: SecureBroker, where: str, text: str) -> None:
    for secret in secure.secrets():
        assert secret not in text, f"a password appears in {where}"


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NEWSDEDUP, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_service_decides_a_feed_over_sasl_ssl(secure, topics, tmp_path):
    feed = tmp_path / "feed.jsonl"
    made = _run(["sample-feed", "--stories", "15", "-o", str(feed)])
    assert made.returncode == 0, made.stderr
    lines = len(feed.read_text().splitlines())
    # produce logs in with PLAIN through a config file ...
    config = _toml_config(tmp_path / "plain.toml", secure.bootstrap, secure.plain_config())
    produced = _run(["produce", str(feed), "--topic", topics.input, "--config", str(config)])
    assert produced.returncode == 0, produced.stderr
    _assert_no_secret(secure, "produce's output", produced.stdout + produced.stderr)

    # ... the service with SCRAM through NEWSDEDUP_KAFKA_CLIENT_* variables.
    service = ServiceProcess(
        secure.bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "service.log",
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        **_client_env(secure.scram_config()),
    )
    with service:
        reader = secure.scram_config()
        decisions = read_all(
            secure.bootstrap,
            topics.output,
            expected=1,
            timeout=120,
            service=service,
            client=reader,
            settle=0.5,
        )
        dead = read_all(
            secure.bootstrap,
            topics.dlq,
            expected=1,
            timeout=60,
            service=service,
            client=reader,
            settle=0.5,
        )
        deadline = time.monotonic() + 90
        while len(decisions) + len(dead) < lines and time.monotonic() < deadline:
            decisions = read_all(
                secure.bootstrap,
                topics.output,
                expected=lines - len(dead),
                timeout=10,
                service=service,
                client=reader,
                settle=0.5,
            )
        status, metrics = service.get("/metrics")
        assert status == 200
        assert service.get("/readyz")[0] == 200
        assert service.stop() == 0

    assert len(decisions) + len(dead) == lines
    assert {r.json()["decision"] for r in decisions} >= {"unique", "duplicate"}
    _assert_no_secret(secure, "/metrics", metrics)
    _assert_no_secret(secure, "the service log", service.log())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_wrong_password_stops_the_service_with_one_clear_line(secure, topics, tmp_path, mechanism):
    wrong = f"wrong-{uuid.uuid4().hex}"
    settings = (
        secure.scram_config(wrong) if mechanism == "SCRAM-SHA-256" else secure.plain_config(wrong)
    )
    service = ServiceProcess(
        secure.bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "service.log",
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        **_client_env(settings),
    )
    before = _failed_logins(secure)
    started = time.monotonic()
    with service:
        code = service.process.wait(timeout=REFUSAL_EXIT_BUDGET_S + 30)
        service.process = None
    elapsed = time.monotonic() - started
    time.sleep(1)  # the broker logs a refusal just after it answers it
    attempts = _failed_logins(secure) - before

    log = service.log()
    errors = [line for line in log.splitlines() if line.startswith("newsdedup: error:")]
    assert code == 2, log[-3000:]
    assert len(errors) == 1, log[-3000:]
    # librdkafka's words differ by mechanism; both name the authentication failure.
    assert "SASL authentication error" in errors[0], errors[0]
    assert elapsed < REFUSAL_EXIT_BUDGET_S, f"took {elapsed:.1f}s to give up"
    assert 1 <= attempts <= MAX_FAILED_LOGINS, f"{attempts} failed logins: a retry storm"
    assert "Traceback" not in log
    for secret in [wrong, *secure.secrets()]:
        assert secret not in log, "a password appears in the service log"


def _trusting_another_ca(secure: SecureBroker, topics: Topics, tmp_path: Path) -> ServiceProcess:
    """A service that trusts a CA of its own, which never signed the broker's certificate:
    TLS must refuse to talk."""
    other_ca, _ = make_certificates(tmp_path / "other-ca", new_password("unused"))
    settings = {**secure.scram_config(), "ssl.ca.location": str(other_ca)}
    return ServiceProcess(
        secure.bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "service.log",
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        **_client_env(settings),
    )


def test_a_broker_certificate_from_another_ca_stops_the_service(secure, topics, tmp_path):
    service = _trusting_another_ca(secure, topics, tmp_path)
    logins_before = _failed_logins(secure, "Authentication failed")
    handshakes_before = _failed_logins(secure, "SSL handshake failed")
    started = time.monotonic()
    with service:
        code = service.process.wait(timeout=REFUSAL_EXIT_BUDGET_S + 30)
        service.process = None
    time.sleep(1)  # the broker logs a refusal just after it answers it
    handshakes = _failed_logins(secure, "SSL handshake failed") - handshakes_before

    log = service.log()
    errors = [line for line in log.splitlines() if line.startswith("newsdedup: error:")]
    assert code == 2, log[-3000:]
    assert len(errors) == 1 and "certificate verify failed" in errors[0], log[-3000:]
    assert time.monotonic() - started < REFUSAL_EXIT_BUDGET_S
    assert 1 <= handshakes <= MAX_FAILED_HANDSHAKES, f"{handshakes} handshakes: a retry storm"
    # The password is never sent to a server that TLS did not verify.
    assert _failed_logins(secure, "Authentication failed") == logins_before
    _assert_no_secret(secure, "the service log", log)


def test_a_refused_client_is_destroyed_before_its_error_leaves_the_service(
    secure, topics, tmp_path
):
    # librdkafka destroys a client with its last reference, and reconnects until then: each
    # attempt one more failed handshake in the broker's log. The error may outlive the
    # service by a while (the command line holds it through the shutdown of the workers and
    # the index); nothing in it may keep the refused client alive.
    service = all_service(load_config(environ=_trusting_another_ca(secure, topics, tmp_path).env))
    with pytest.raises(KafkaFatalError, match="certificate verify failed") as refused:
        service.run()
    time.sleep(0.5)  # an attempt in flight at the refusal reaches the broker's log
    settled = _failed_logins(secure, "SSL handshake failed")
    time.sleep(2)  # ~40 more handshakes, were the client alive
    assert refused.value is not None  # still held, as the command line holds it
    later = _failed_logins(secure, "SSL handshake failed") - settled
    assert later == 0, f"{later} handshakes after the error left the service"


def test_produce_with_a_wrong_password_fails_in_one_line(secure, topics, tmp_path):
    wrong = f"wrong-{uuid.uuid4().hex}"
    config = _toml_config(tmp_path / "bad.toml", secure.bootstrap, secure.plain_config(wrong))
    feed = tmp_path / "one.jsonl"
    feed.write_text('{"id": "a", "title": "t", "content": "some words here"}\n')
    started = time.monotonic()
    result = _run(["produce", str(feed), "--topic", topics.input, "--config", str(config)])

    assert result.returncode == 2
    assert time.monotonic() - started < REFUSAL_EXIT_BUDGET_S
    errors = [line for line in result.stderr.splitlines() if line.startswith("newsdedup: error:")]
    assert len(errors) == 1, result.stderr
    assert "authentication" in errors[0].lower(), errors[0]
    assert "Traceback" not in result.stderr
    assert wrong not in result.stdout + result.stderr


def test_librdkafka_debug_output_masks_the_password(secure, topics, tmp_path):
    # debug=all makes librdkafka print its whole configuration at start.
    client = {**secure.plain_config(), "debug": "all"}
    config = _toml_config(tmp_path / "debug.toml", secure.bootstrap, client)
    feed = tmp_path / "one.jsonl"
    feed.write_text('{"id": "a", "title": "t", "content": "some words here"}\n')
    result = _run(["produce", str(feed), "--topic", topics.input, "--config", str(config)])

    assert result.returncode == 0, result.stderr[-3000:]
    assert "sasl.password = [redacted]" in result.stderr
    _assert_no_secret(secure, "librdkafka's debug output", result.stdout + result.stderr)


def test_help_never_shows_a_password_set_in_the_environment(secure):
    env = {
        f"NEWSDEDUP_{key.upper()}": value
        for key, value in _client_env(secure.scram_config()).items()
    }
    commands = [[], ["run"], ["check"], ["produce"], ["fingerprint"], ["index"], ["bench"]]
    for command in commands:
        result = _run([*command, "--help"], **env)
        assert result.returncode == 0, result.stderr
        _assert_no_secret(secure, f"newsdedup {' '.join(command)} --help", result.stdout)
