"""`newsdedup run`: the service."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Callable

from consumer.config import load_config
from consumer.ops.logs import setup_logging
from consumer.roles import ROLES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="the service: consume the feed, publish decisions, serve /metrics",
        description="Consume the feed topic and publish one decision per article. Options come "
        "from --config FILE and NEWSDEDUP_<SECTION>_<KEY> variables (see README).",
    )
    p.add_argument("--config", metavar="FILE", help="configuration file (TOML)")
    p.add_argument(
        "--role",
        choices=ROLES,
        default="all",
        help="all (default): the whole pipeline in this process; fingerprint: feed → internal "
        "topic, stateless; decide: internal topic → decisions, one writer per domain "
        '(README, "Scale-out")',
    )
    p.set_defaults(handler=run_service)


def run_service(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    setup_logging(config.log.level, config.log.format)
    # After logging is set up: these import librdkafka.
    from consumer.roles import service_factory
    from consumer.stream.clients import check_client_settings

    check_client_settings(config.kafka)
    service = service_factory(args.role)(config)

    def stop(signum: int, _frame: object) -> None:
        service.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return _run_off_the_main_thread(service.run)


def _run_off_the_main_thread(run: Callable[[], int]) -> int:
    """Python runs signal handlers only in the main thread, between its bytecodes, which a
    blocking librdkafka call holds up (a transaction's offsets during a broker outage: a
    minute). So the service runs in a thread of its own while the main thread waits for it in
    short slices, free to take SIGTERM at once (and to enforce [service] stop_timeout)."""
    outcome: list[int | BaseException] = []

    def target() -> None:
        try:
            outcome.append(run())
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=target, name="service")
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result
