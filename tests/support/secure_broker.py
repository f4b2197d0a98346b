"""A broker that lets in only authenticated clients over TLS, for the security tests.

`start_secure_broker` makes a throw-away CA and a broker certificate with openssl, then starts
scripts/kafka-local with a single SASL_SSL client listener that accepts PLAIN and SCRAM-SHA-256
(the SCRAM user is added when the log dir is formatted, as in a real KRaft cluster).
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import LocalBroker

PLAIN_USER = "newsdedup-plain"
SCRAM_USER = "newsdedup-scram"
# The broker's own login on its listener (inter-broker traffic, the readiness check).
ADMIN_USER = "admin"


@dataclass(frozen=True, slots=True)
class SecureBroker:
    broker: LocalBroker
    bootstrap: str
    ca_path: Path
    admin_password: str
    plain_password: str
    scram_password: str

    def client_config(self, mechanism: str, username: str, password: str) -> dict[str, str]:
        """librdkafka settings for one login, as [kafka.client] would hold them."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": username,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca_path),
        }

    def admin_config(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap,
            **self.client_config("PLAIN", ADMIN_USER, self.admin_password),
        }

    def plain_config(self, password: str | None = None) -> dict[str, str]:
        return self.client_config("PLAIN", PLAIN_USER, password or self.plain_password)

    def scram_config(self, password: str | None = None) -> dict[str, str]:
        return self.client_config("SCRAM-SHA-256", SCRAM_USER, password or self.scram_password)

    def secrets(self) -> list[str]:
        return [self.admin_password, self.plain_password, self.scram_password]


def new_password(label: str) -> str:
    # Distinctive and long, so a grep for it cannot match anything by chance.
    return f"{label}-{secrets.token_hex(12)}"


def make_certificates(directory: Path, keystore_password: str) -> tuple[Path, Path]:
    """A CA (PEM) and a PKCS#12 keystore with the broker's key and a certificate for 127.0.0.1
    signed by that CA. Returns (ca.pem, broker.p12)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_pem = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "broker.key", directory / "broker.csr", directory / "broker.pem"
    keystore = directory / "broker.p12"
    extensions = directory / "broker.ext"
    # Both librdkafka and the broker's own inter-broker client verify the host name.
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    commands = [
        # The CA: self-signed, allowed to sign certificates and nothing else.
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", ca_key, "-out", ca_pem, "-subj", "/CN=newsdedup test CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
         "-CAcreateserial", "-days", "2", "-out", cert, "-extfile", extensions],
        ["openssl", "pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", ca_pem,
         "-name", "broker", "-out", keystore, "-passout", f"pass:{keystore_password}"],
    ]  # fmt: skip
    for command in commands:
        subprocess.run([str(c) for c in command], check=True, capture_output=True, timeout=60)
    return ca_pem, keystore


def start_secure_broker(broker: LocalBroker, directory: Path) -> SecureBroker:
    """Start `broker` with its TLS files, configs and credentials kept in `directory`."""
    broker.data_dir.mkdir(parents=True, exist_ok=True)
    admin_password = new_password("admin")
    plain_password = new_password("plain")
    scram_password = new_password("scram")
    keystore_password = new_password("keystore")
    ca_pem, keystore = make_certificates(directory / "tls", keystore_password)

    listener = f"127.0.0.1:{broker.port}"
    plain_users = f'user_{ADMIN_USER}="{admin_password}" user_{PLAIN_USER}="{plain_password}"'
    server_config = directory / "secure.properties"
    server_config.write_text(
        "\n".join(
            [
                f"listeners=SASL_SSL://{listener},CONTROLLER://127.0.0.1:{broker.controller_port}",
                f"advertised.listeners=SASL_SSL://{listener}",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
                "inter.broker.listener.name=SASL_SSL",
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                "sasl.mechanism.inter.broker.protocol=PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config="
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{ADMIN_USER}" password="{admin_password}" {plain_users};',
                "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "ssl.keystore.type=PKCS12",
                f"ssl.keystore.location={keystore}",
                f"ssl.keystore.password={keystore_password}",
                f"ssl.key.password={keystore_password}",
                # The broker is a client of itself (inter-broker listener): it trusts our CA.
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={ca_pem}",
                "",
            ]
        )
    )
    secure = SecureBroker(broker, listener, ca_pem, admin_password, plain_password, scram_password)
    readiness_config = directory / "readiness.properties"
    readiness_config.write_text(
        "".join(f"{k}={v}\n" for k, v in secure.admin_config().items() if k != "bootstrap.servers")
    )
    scram = f"SCRAM-SHA-256=[name={SCRAM_USER},password={scram_password}]"
    result = broker.run(
        "start",
        KAFKA_EXTRA_CONFIG=str(server_config),
        KAFKA_CLIENT_CONFIG=str(readiness_config),
        KAFKA_FORMAT_ARGS=f"--add-scram {scram}",
    )
    if result.returncode != 0:
        log = (
            broker.log_path.read_text(errors="replace")[-4000:] if broker.log_path.exists() else ""
        )
        raise RuntimeError(f"secure broker did not start:\n{result.stderr}\n{log}")
    return secure
