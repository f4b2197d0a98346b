"""What a Kafka operator does to a running feed, with Kafka's own tools where there is one, on
the real broker: grow the input topic, let retention delete unread input, reset the group's
offsets after a stop, and (by mistake) start a second `--role all` instance in the group."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.error
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from feeds import corpus_feed
from kafka_tools import reset_offsets_to_earliest
from service_support import (
    ServiceProcess,
    Topics,
    committed_offsets,
    produce,
    read_all,
    wait_until,
)

pytestmark = pytest.mark.kafka


@pytest.fixture
def topics(new_topic) -> Topics:
    return Topics(new_topic("ops-in", partitions=3), new_topic("ops-out", 3), new_topic("ops-dlq"))


def service_for(kafka_bootstrap: str, topics: Topics, tmp_path, name: str, **options: str):
    return ServiceProcess(
        kafka_bootstrap,
        topics,
        tmp_path / f"state-{name}",
        tmp_path / f"{name}.log",
        group_id=options.pop("group_id", f"ops-{uuid.uuid4().hex[:8]}"),
        **options,
    )


def metric(service: ServiceProcess, name: str, **labels: str) -> float | None:
    """The value of one series on /metrics, or None when it is not there."""
    try:
        _status, text = service.get("/metrics")
    except urllib.error.URLError:
        return None  # not listening yet
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "")
    found = re.search(rf"^{series} (\S+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


def ready(service: ServiceProcess) -> tuple[int, str]:
    try:
        return service.get("/readyz")
    except urllib.error.URLError:
        return 0, "not listening yet"


def wait_for_metric(service: ServiceProcess, name: str, value: float, timeout: float) -> None:
    wait_until(
        lambda: metric(service, name) == value,
        timeout,
        what=f"{name} == {value} (last: {metric(service, name)})",
    )


def test_offsets_can_be_reset_right_after_a_clean_stop(kafka_bootstrap, topics, tmp_path):
    """A clean stop leaves the consumer group: Kafka's ConsumerGroupCommand resets the offsets
    at once instead of refusing while the stopped instance's session lasts (45 s)."""
    feed = corpus_feed(60)
    group = f"reset-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, topics.input, feed)
    with service_for(kafka_bootstrap, topics, tmp_path, "first", group_id=group) as service:
        read_all(kafka_bootstrap, topics.output, expected=len(feed), settle=0, service=service)
        wait_until(
            lambda: sum(committed_offsets(kafka_bootstrap, group, topics.input, 3)) == len(feed),
            30,
            what="every offset committed",
        )
        assert service.stop() == 0

    output = reset_offsets_to_earliest(kafka_bootstrap, group, topics.input)
    assert "Error" not in output, output
    assert committed_offsets(kafka_bootstrap, group, topics.input, 3) == [0, 0, 0], output
    assert "left the consumer group" in service.log()


def test_leave_group_on_stop_false_keeps_the_place_for_a_restart(kafka_bootstrap, topics, tmp_path):
    """The option's other side: the stopped static member stays in the group (a restart
    takes its partitions back without a rebalance), and the group refuses a reset meanwhile."""
    group = f"stay-{uuid.uuid4().hex[:8]}"
    options = {"group_id": group, "kafka_leave_group_on_stop": "false"}
    with service_for(kafka_bootstrap, topics, tmp_path, "stay", **options) as service:
        wait_until(lambda: ready(service)[0] == 200, 60, what="/readyz 200")
        assert service.stop() == 0
    assert "left the consumer group" not in service.log()
    output = reset_offsets_to_earliest(kafka_bootstrap, group, topics.input)
    assert "can only be reset if the group" in output, output


def test_added_partitions_are_read_within_30_s_named_and_counted(
    kafka_bootstrap, kafka_admin: AdminClient, topics, tmp_path
):
    feed = corpus_feed(90)
    head, tail = feed[:30], feed[30:]
    with service_for(kafka_bootstrap, topics, tmp_path, "grow") as service:
        produce(kafka_bootstrap, topics.input, head)
        read_all(kafka_bootstrap, topics.output, expected=len(head), settle=0, service=service)
        wait_for_metric(service, "newsdedup_assigned_partitions", 3, 15)

        kafka_admin.create_partitions([NewPartitions(topics.input, 6)])[topics.input].result(30)
        grown = time.monotonic()
        for partition in (3, 4, 5):
            produce(kafka_bootstrap, topics.input, tail[partition - 3 :: 3], partition=partition)
        read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(feed),
            settle=0,
            timeout=45,
            service=service,
        )
        took = time.monotonic() - grown
        print(f"new partitions read {took:.1f} s after the topic grew")
        assert took < 30, f"{took:.1f} s until the new partitions were read"
        assert re.search(r"new input partitions assigned.*\[3, 4, 5\]", service.log()), (
            service.log()[-3000:]
        )
        wait_for_metric(service, "newsdedup_input_partitions", 6, 15)
        assert metric(service, "newsdedup_assigned_partitions") == 6
        assert ready(service) == (200, "ok\n")


def test_input_deleted_before_it_was_read_is_a_warning_and_a_count(
    kafka_bootstrap, kafka_admin: AdminClient, topics, tmp_path
):
    """Records deleted from the input while the service was stopped (retention; here the
    admin API's DeleteRecords moves the log start the same way) are skipped loudly."""
    feed = corpus_feed(200)
    head, unread = feed[:30], feed[30:]
    group = f"lost-{uuid.uuid4().hex[:8]}"
    with service_for(kafka_bootstrap, topics, tmp_path, "before", group_id=group) as service:
        produce(kafka_bootstrap, topics.input, head)
        read_all(kafka_bootstrap, topics.output, expected=len(head), settle=0, service=service)
        wait_until(
            lambda: sum(committed_offsets(kafka_bootstrap, group, topics.input, 3)) == len(head),
            30,
            what="every offset committed",
        )
        assert service.stop() == 0
    produce(kafka_bootstrap, topics.input, unread[:150], partition=1)
    produce(kafka_bootstrap, topics.input, unread[150:], partition=2)
    ends = [TopicPartition(topics.input, p, -1) for p in (1, 2)]  # -1: the high watermark
    for future in kafka_admin.delete_records(ends, request_timeout=30).values():
        future.result(30)

    with service_for(kafka_bootstrap, topics, tmp_path, "after", group_id=group) as service:
        wait_until(lambda: ready(service)[0] == 200, 60, what="/readyz 200")
        wait_until(
            lambda: (
                metric(service, "newsdedup_input_records_skipped_total", reason="retention")
                == len(unread)
            ),
            20,
            what="the skipped records counted",
        )
        log = service.log()
        skipped = re.findall(r"WARNING.*input records deleted before they were read.*", log)
        assert len(skipped) == 2, log[-3000:]
        assert any("partition=1 " in line and "skipped=150" in line for line in skipped), log
        assert any("partition=2 " in line and "skipped=20" in line for line in skipped), log
        # A new index beside committed offsets is rebuilt from the feed: nothing was lost.
        assert "lost, or an older copy" not in log
        assert "the index is empty (a new instance, or a new index directory)" in log, log[-3000:]


def test_input_deleted_while_the_service_lags_is_a_warning_and_a_count(
    kafka_bootstrap, kafka_admin: AdminClient, topics, tmp_path
):
    """The service falls behind (here: frozen with SIGSTOP, for less than its session) while
    the input's retention deletes what it has not read yet: librdkafka's fetch finds its
    offset gone and moves on to the earliest record retained; the service says how many it
    skipped."""
    feed = corpus_feed(140)
    head, unread, after = feed[:20], feed[20:120], feed[120:]
    with service_for(kafka_bootstrap, topics, tmp_path, "lagging") as service:
        produce(kafka_bootstrap, topics.input, head)
        read_all(kafka_bootstrap, topics.output, expected=len(head), settle=0, service=service)
        wait_until(lambda: ready(service)[0] == 200, 30, what="/readyz 200")
        assert service.process is not None
        os.kill(service.process.pid, signal.SIGSTOP)
        try:
            produce(kafka_bootstrap, topics.input, unread, partition=0)
            end = [TopicPartition(topics.input, 0, -1)]  # -1: the high watermark
            for deleted in kafka_admin.delete_records(end, request_timeout=30).values():
                deleted.result(30)
            produce(kafka_bootstrap, topics.input, after, partition=0)
        finally:
            os.kill(service.process.pid, signal.SIGCONT)
        wait_until(
            lambda: (
                metric(service, "newsdedup_input_records_skipped_total", reason="retention")
                == len(unread)
            ),
            20,
            what="the skipped records counted",
        )
        records = read_all(
            kafka_bootstrap,
            topics.output,
            expected=len(head) + len(after),
            settle=0,
            service=service,
        )
        assert len(records) == len(head) + len(after)
        log = service.log()
        skipped = re.findall(r"WARNING.*input records deleted before they were read.*", log)
        assert len(skipped) == 1 and "partition=0 " in skipped[0], log[-3000:]
        assert f"skipped={len(unread)} " in skipped[0], skipped


def test_a_second_role_all_instance_in_the_group_shows_the_split(kafka_bootstrap, topics, tmp_path):
    group = f"split-{uuid.uuid4().hex[:8]}"
    first = service_for(kafka_bootstrap, topics, tmp_path, "first", group_id=group)
    second = service_for(kafka_bootstrap, topics, tmp_path, "second", group_id=group)
    with first, second:
        for service in (first, second):
            wait_until(lambda s=service: ready(s)[0] == 200, 60, what="/readyz 200")
        wait_until(
            lambda: (
                {
                    metric(first, "newsdedup_assigned_partitions"),
                    metric(second, "newsdedup_assigned_partitions"),
                }
                == {1, 2}
            ),
            60,
            what="the partitions split between the two",
        )
        for service in (first, second):
            status, answer = ready(service)
            assert status == 200 and "of the 3 input partitions" in answer, answer
            assert "one --role all instance per feed" in service.log()
            assert "until scale-out lands" not in service.log()
            wait_for_metric(service, "newsdedup_input_partitions", 3, 15)
