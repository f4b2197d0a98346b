"""The HTTP endpoint: /metrics (Prometheus), /healthz (alive, loop turning), /readyz (serving)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from consumer.errors import ConfigError
from consumer.ops.metrics import Metrics


@dataclass
class HealthState:
    """Written by the service loop, read by the HTTP thread; single assignments need no lock."""

    stuck_after_s: float = 60.0
    last_turn: float = field(default_factory=time.monotonic)
    index_open: bool = False
    broker_reachable: bool = False
    assigned: int = 0
    input_partitions: int = 0  # of the input topic, assigned or not
    # A role that must see the whole feed (`--role all`): when it is assigned only part of
    # it, it is still ready (it serves what it has), but /readyz says so.
    needs_whole_feed: bool = False
    # What the service waits for before it has partitions: shown by /readyz meanwhile.
    waiting_for: str = "the input topic"
    # Why the last batch's outputs failed, until a batch succeeds: the service is not moving.
    output_error: str | None = None

    def turn(self) -> None:
        self.last_turn = time.monotonic()

    def alive(self) -> tuple[bool, str]:
        idle = time.monotonic() - self.last_turn
        if idle > self.stuck_after_s:
            return False, f"loop has not turned for {idle:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if not self.index_open:
            return False, "index not open"
        if not self.broker_reachable:
            return False, "broker not reachable"
        if self.assigned == 0:
            return False, f"no input partitions assigned: waiting for {self.waiting_for}"
        if self.output_error is not None:
            return False, f"outputs not delivered, retrying the batch: {self.output_error}"
        if self.needs_whole_feed and self.assigned < self.input_partitions:
            return True, (
                f"ok, but this instance decides only {self.assigned} of the "
                f"{self.input_partitions} input partitions (another --role all instance shares "
                "its consumer group, or partitions just added are not assigned yet): "
                "duplicates across the parts are missed"
            )
        return True, "ok"


class HealthServer:
    def __init__(self, listen: str, state: HealthState, metrics: Metrics) -> None:
        host, _, port = listen.rpartition(":")
        self.state = state
        self.metrics = metrics
        handler = _make_handler(state, metrics)
        try:
            self._server = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), handler)
        except OSError as e:
            # A port taken by another process is an operator's fix: one line, no traceback.
            raise ConfigError(
                f"option [metrics] listen: cannot listen on {listen}: {e.strerror or e}"
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _make_handler(state: HealthState, metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                ok, _reason = state.ready()
                metrics.ready.set(1 if ok else 0)
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._send_check(*state.alive())
            elif path == "/readyz":
                self._send_check(*state.ready())
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain")

        def _send_check(self, ok: bool, reason: str) -> None:
            self._send(200 if ok else 503, (reason + "\n").encode(), "text/plain; charset=utf-8")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the service's own log

    return Handler
