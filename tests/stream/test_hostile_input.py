"""Hostile input through the whole chain the service runs per message, on a real RocksDB index:
parse → normalize → fingerprint → decide → index write → decision or dead letter bytes.

Every input must come out as a schema-valid decision or a dead letter with a known reason,
within a bounded time, and the index batch must commit. The number of inputs each fuzz test
tried is printed in the session summary ("fuzzing").
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.config import FingerprintConfig, InputConfig
from consumer.records import Decision, InvalidReason, Message, Rejection, Source
from consumer.scaleout.domains import MAX_DOMAIN_NAME_BYTES, domain_dir_name
from consumer.stream.dead_letters import dlq_headers
from consumer.stream.pipeline import Pipeline
from consumer.stream.workers import Analyzer
from indexstore import IndexOptions, IndexStore

REPO = Path(__file__).resolve().parents[2]
DECISION_SCHEMA = json.loads((REPO / "config/schemas/decision.schema.json").read_text())
KAFKA_TS = 1_700_000_000_000
# Far above what a message costs (milliseconds; a 1 MB message ~0.1 s): a hang, not a slow path.
SECONDS_PER_BATCH = 10.0
# The coverage-guided run's budget: long enough to get past parsing into every stage.
FUZZ_SECONDS = 90

# Every kind of character that trips text code: controls, format marks (RTL, zero width),
# lone surrogates, private use, unassigned, combining marks, CJK of both scripts, emoji.
hostile_chars = st.characters(codec=None) | st.sampled_from(
    list("\x00\x1b\u202e\u200b\ufeff\ud800\udfff\ue000\u0301龍龙新聞新闻😀🇭🇰\u3000，。")
)
hostile_text = st.text(hostile_chars, max_size=300)


def giant_text(draw: st.DrawFn) -> str:
    unit = draw(st.sampled_from(["新聞", "word ", "😀", "a", "\u0301", "<p>", "&amp;"]))
    return unit * draw(st.integers(1, 400_000 // len(unit)))


@st.composite
def hostile_objects(draw: st.DrawFn) -> bytes:
    obj: dict[str, object] = {}
    for field in ("id", "title", "content", "published_at", "url", "source"):
        kind = draw(st.sampled_from(["absent", "text", "giant", "number", "other"]))
        if kind == "text":
            obj[field] = draw(hostile_text)
        elif kind == "giant":
            obj[field] = giant_text(draw)
        elif kind == "number":
            obj[field] = draw(
                st.integers(-(10**30), 10**30) | st.floats() | st.sampled_from([10**18, -1, 0])
            )
        elif kind == "other":
            obj[field] = draw(st.none() | st.booleans() | st.lists(st.integers(), max_size=3))
    if draw(st.booleans()):
        obj["id"] = f"fuzz-{draw(st.integers(0, 50))}"  # re-deliveries and updates too
    # json.dumps would refuse nothing here; surrogates go out as \ud800 escapes.
    return json.dumps(obj, ensure_ascii=draw(st.booleans()), allow_nan=True).encode(
        "utf-8", "surrogatepass"
    )


@st.composite
def hostile_documents(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(1, 200_000))
    shape = draw(st.sampled_from(["array", "object", "digits", "exponent"]))
    if shape == "array":
        return b'{"id":"deep","title":"nested story","x":' + b"[" * depth + b"]" * depth + b"}"
    if shape == "object":
        return b'{"id":"deep","x":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
    if shape == "digits":
        return b'{"id":"n","title":"numbers","published_at":' + b"9" * depth + b"}"
    return b'{"id":"e","title":"exponent","published_at":1e' + str(depth).encode() + b"}"


hostile_messages = st.one_of(
    st.binary(max_size=4096), hostile_objects(), hostile_documents(), st.none()
)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory):
    options = IndexOptions(max_distance=12, retention_ms=10**13, memory_bytes=16 << 20)
    with (
        IndexStore.open(tmp_path_factory.mktemp("fuzz") / "state", options) as store,
        Analyzer(InputConfig(), FingerprintConfig(), workers=None) as analyzer,
    ):
        yield Pipeline(store, analyzer, clock_ms=lambda: KAFKA_TS)


def check_outcome(outcome: Decision | Rejection) -> None:
    if isinstance(outcome, Decision):
        decision = json.loads(outcome.to_bytes())
        jsonschema.validate(decision, DECISION_SCHEMA)
        outcome.id.encode("utf-8")  # the record's key
    else:
        assert outcome.invalid.reason in set(InvalidReason)
        assert outcome.invalid.reason is not InvalidReason.INTERNAL_ERROR, outcome.invalid
        for _, value in dlq_headers(outcome):
            assert isinstance(value, bytes)


def test_hostile_messages_are_decided_or_dead_lettered(pipeline, record_fuzz_inputs):
    tried = 0
    offset = 0

    @settings(
        max_examples=2000,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.lists(hostile_messages, min_size=1, max_size=4))
    def check(values: list[bytes | None]) -> None:
        nonlocal tried, offset
        messages = []
        for value in values:
            messages.append(Message(None, value, Source("fuzz", 0, offset), KAFKA_TS))
            offset += 1
        t0 = time.perf_counter()
        decided = pipeline.decide(messages)
        decided.index_batch.commit()
        elapsed = time.perf_counter() - t0
        assert elapsed < SECONDS_PER_BATCH, f"{elapsed:.1f}s for {len(values)} messages"
        assert len(decided.outcomes) == len(messages)
        for outcome in decided.outcomes:
            check_outcome(outcome)
        tried += len(values)

    check()
    record_fuzz_inputs(tried)


def test_every_surrogate_position_in_an_id_is_dead_lettered(pipeline):
    """An id is a RocksDB key and a Kafka key: UTF-8 only. JSON can still carry "\\ud800"."""
    for value in (b'{"id":"\\ud800","title":"story"}', b'{"id":"a\\udfffb","title":"story"}'):
        decided = pipeline.decide([Message(None, value, Source("fuzz", 1, 0), KAFKA_TS)])
        decided.index_batch.commit()
        (outcome,) = decided.outcomes
        assert isinstance(outcome, Rejection)
        assert outcome.invalid.reason is InvalidReason.BAD_FIELD_TYPE
        assert "surrogate" in outcome.invalid.detail


@pytest.mark.parametrize("domain", ["\ud800", "a" * MAX_DOMAIN_NAME_BYTES, "新" * 30])
def test_a_domain_that_cannot_name_a_directory_is_refused(domain):
    """The scale-out roles name a directory after the dedup domain, a field of the article."""
    with pytest.raises(ValueError, match=r"Unicode|too long"):
        domain_dir_name(domain)


def test_ordinary_domains_name_directories():
    assert domain_dir_name("") == "domain="
    assert domain_dir_name("zh/hk") == "domain=zh%2Fhk"  # never a path of its own
    assert domain_dir_name("新闻") == "domain=%E6%96%B0%E9%97%BB"


@pytest.mark.slow
def test_coverage_guided_fuzzing_finds_no_crash(tmp_path, record_fuzz_inputs):
    """atheris (libFuzzer) drives tests/fuzz_messages.py for a bounded time; any exception,
    internal error, timeout or runaway memory is a failure with the input left in tmp_path."""
    result = subprocess.run(
        [
            # Through a shell that forks it: a process started by exec keeps the peak RSS of
            # the process that forked it (Linux carries `ru_maxrss` through exec), which is
            # what -rss_limit_mb reads, and the test run's own process may hold a gigabyte by
            # then; a forked child starts from the shell's few megabytes.
            "sh",
            "-c",
            '"$@"; exit $?',
            "sh",
            sys.executable,
            str(REPO / "tests" / "support" / "fuzz_messages.py"),
            str(tmp_path / "state"),
            f"-max_total_time={FUZZ_SECONDS}",
            "-timeout=20",  # seconds for one input
            # ~0.2 GiB after 100,000 inputs; an instrumented index kept every search's arrays
            # and passed 1.5 GiB (benchmarks/history/2026-11-24.md, "Many identical fingerprints").
            "-rss_limit_mb=1024",
            "-seed=20261124",
            f"-artifact_prefix={tmp_path}/",
            "-print_final_stats=1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=FUZZ_SECONDS + 240,
        check=False,
    )
    report = result.stderr
    assert result.returncode == 0, report[-4000:]
    record_fuzz_inputs(int(re.search(r"stat::number_of_executed_units: (\d+)", report)[1]))
