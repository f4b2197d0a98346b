"""Stopping and restarting `newsdedup run` the way supervisors do it, on the real broker: a
signal to the whole process group (`kill -- -PGID`, `timeout`, systemd's default KillMode), and
a SIGKILL followed by a restart."""

from __future__ import annotations

import re
import signal
import socket
import time

import pytest
from feeds import corpus_feed
from service_support import (
    ServiceProcess,
    Topics,
    decisions_by_id,
    family_tree,
    group_members,
    produce,
    read_all,
    wait_until,
)

from consumer.stream.clients import group_instance_id

pytestmark = pytest.mark.kafka

STOP_WITHIN_S = 2.0


@pytest.fixture
def topics(new_topic) -> Topics:
    return Topics(new_topic("in", partitions=3), new_topic("out", 3), new_topic("dlq"))


def stop_group(service: ServiceProcess, signum: int) -> None:
    """Signal the service's whole process group; it must exit 0 within STOP_WITHIN_S, leave no
    process behind and print no traceback."""
    assert service.process is not None
    pid = service.process.pid
    family = family_tree(pid)
    assert len(family) >= 3, f"expected the service, its worker and a helper: {family}"
    started = time.monotonic()
    service.signal_group(signum)
    code = service.process.wait(timeout=30)
    took = time.monotonic() - started
    service.process = None
    assert code == 0, service.log()[-3000:]
    assert took < STOP_WITHIN_S, f"{took:.2f} s to stop"
    wait_until(lambda: not group_members(pid), 2.0, what="the process group to be gone")
    assert "Traceback" not in service.log(), service.log()[-3000:]
    assert "KeyboardInterrupt" not in service.log()
    assert "stop timed out" not in service.log()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_group_signal_idle_and_mid_batch_exits_zero_at_once(
    kafka_bootstrap, topics, tmp_path, delivery, signum
):
    feed = corpus_feed(6000)
    ids = {a["id"] for a in feed}
    group = f"group-signal-{delivery}-{signum.name}"

    def service(name: str) -> ServiceProcess:
        return ServiceProcess(
            kafka_bootstrap,
            topics,
            tmp_path / "state",
            tmp_path / f"{name}.log",
            group_id=group,
            delivery=delivery,
            # One instance, restarted: each ServiceProcess has a metrics port of its own, which
            # would make each start a new static member, waiting out the last one's session.
            scaleout_instance_id=group,
        )

    head, tail = feed[:300], feed[300:]
    produce(kafka_bootstrap, topics.input, head)
    idle = service("idle").start(own_group=True)
    read_all(kafka_bootstrap, topics.output, expected=len(head), settle=1.0, service=idle)
    stop_group(idle, signum)

    busy = service("busy").start(own_group=True)
    produce(kafka_bootstrap, topics.input, tail)
    # Past the head's decisions: the tail is being worked on when the signal comes.
    seen = read_all(kafka_bootstrap, topics.output, expected=len(head) + 1, settle=0, service=busy)
    stop_group(busy, signum)
    assert len(seen) < len(feed), "the feed was done before the signal: not mid-batch"

    with service("rest") as rest:
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(feed), timeout=300, service=rest
        )
        assert rest.stop() == 0
    decisions_by_id(records, ids, delivery)


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_restart_after_sigkill_gets_its_partitions_back_at_once(
    kafka_bootstrap, topics, tmp_path, delivery
):
    """Static group membership: the restarted instance takes the dead one's place in the group
    instead of waiting out its session (45 s by default)."""
    feed = corpus_feed(600)
    service = ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / "state",
        tmp_path / "svc.log",
        group_id=f"restart-{delivery}",
        delivery=delivery,
    )
    with service:
        wait_until(lambda: "partitions assigned" in service.log(), 90, what="assignment")
        service.kill()
        started = time.monotonic()
        service.start()
        wait_until(
            lambda: len(re.findall("partitions assigned", service.log())) >= 2,
            30,
            what="the restarted instance's assignment",
        )
        took = time.monotonic() - started
        assert took < 15, f"{took:.1f} s to get the partitions back"
        produce(kafka_bootstrap, topics.input, feed)
        records = read_all(
            kafka_bootstrap, topics.output, expected=len(feed), timeout=120, service=service
        )
        assert service.stop() == 0
    decisions_by_id(records, {a["id"] for a in feed}, delivery)


def test_default_instance_ids_are_stable_and_differ_per_metrics_port() -> None:
    first = group_instance_id("", "0.0.0.0:9108")
    assert first == group_instance_id("", "0.0.0.0:9108") == f"{socket.gethostname()}-9108"
    assert group_instance_id("", "127.0.0.1:9109") != first
    assert group_instance_id("edge-3", "0.0.0.0:9108") == "edge-3"


def test_two_instances_sharing_an_instance_id_the_older_stops_with_one_line(
    kafka_bootstrap, topics, tmp_path
):
    """A static member fenced by a newer one with its id must stop, not idle as a zombie."""

    def instance(name: str) -> ServiceProcess:
        return ServiceProcess(
            kafka_bootstrap,
            topics,
            tmp_path / name,
            tmp_path / f"{name}.log",
            group_id="shared-id",
            scaleout_instance_id="same",
        )

    with instance("older") as older:
        wait_until(lambda: "partitions assigned" in older.log(), 90, what="assignment")
        with instance("newer") as newer:
            wait_until(lambda: not older.running(), 60, what="the older instance to stop")
            assert older.process.returncode == 2, older.log()[-3000:]
            errors = [line for line in older.log().splitlines() if "newsdedup: error:" in line]
            assert len(errors) == 1 and "fenced" in errors[0], older.log()[-3000:]
            older.process = None
            assert newer.running()
            assert newer.stop() == 0
