"""The roles a `newsdedup` process plays, side by side; consumer/stream/ is the runtime they share.

- `all` (all.py): `run --role all`, the whole pipeline in one process against one index.
- `fingerprint` (fingerprint.py): `run --role fingerprint`, feed → internal topic, stateless.
- `decide` (decide.py, its deciding in decider.py): `run --role decide`, internal topic →
  decisions and changelog, one writer per dedup domain.
- `replay` (replay.py): the index rebuilt from the retained feed, as `--role all` would have
  decided it (at its start, and `newsdedup index rebuild`).

Each `run` role is a `Stage` of the one Kafka loop (consumer/stream/service.py), built by its
factory (`all_service`, `fingerprint_service`, `decide_service`); `service_factory` picks it by
name. What the two scale-out roles share (topics, wire format, domains, the decide role's
order, the changelog) is in consumer/scaleout/.

May import: consumer.scaleout and everything it may.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # this package's own import stays light: the CLI imports it for ROLES
    from consumer.config import Config
    from consumer.ops.metrics import Metrics
    from consumer.stream.service import Service

# The roles `newsdedup run --role` takes.
ROLES = ("all", "fingerprint", "decide")


class ServiceFactory(Protocol):
    def __call__(self, config: Config, metrics: Metrics | None = None) -> Service: ...


def service_factory(role: str) -> ServiceFactory:
    """The factory of `role`'s Service. Imported on demand: each role loads librdkafka (and the
    CLI sets up logging first)."""
    if role == "fingerprint":
        from consumer.roles.fingerprint import fingerprint_service

        return fingerprint_service
    if role == "decide":
        from consumer.roles.decide import decide_service

        return decide_service
    if role == "all":
        from consumer.roles.all import all_service

        return all_service
    raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
