"""`newsdedup run`: the service."""

from __future__ import annotations

import argparse
import signal

from consumer.config import load_config
from consumer.logs import setup_logging


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="the service: consume the feed, publish decisions, serve /metrics",
        description="Consume the feed topic and publish one decision per article. Options come "
        "from --config FILE and NEWSDEDUP_<SECTION>_<KEY> variables (see README).",
    )
    p.add_argument("--config", metavar="FILE", help="configuration file (TOML)")
    p.set_defaults(handler=run_service)


def run_service(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    setup_logging(config.log.level, config.log.format)
    from consumer.kafka_clients import check_client_settings  # imports librdkafka
    from consumer.service import Service  # after logging is set up

    check_client_settings(config.kafka)
    service = Service(config)

    def stop(signum: int, _frame: object) -> None:
        service.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return service.run()
