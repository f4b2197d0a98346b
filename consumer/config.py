"""Configuration: built-in defaults, then a TOML file, then NEWSDEDUP_<SECTION>_<KEY> variables.

Every option is a typed field of a frozen dataclass below; `config/newsdedup.toml` documents the
same defaults (a test keeps the two equal). A bad option stops the start with one line naming it.
Durations and sizes are parsed by consumer/quantities.py.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from consumer.errors import ConfigError
from consumer.formats import LETTERS_KEY_CHARS
from consumer.quantities import Duration, Size
from indexstore.layout import table_bytes_per_article
from indexstore.model import DEFAULT_MAX_TABLE_BYTES

ENV_PREFIX = "NEWSDEDUP_"
DELIVERY_MODES = ("at_least_once", "exactly_once")
OFFSET_RESETS = ("earliest", "latest")


_WRITTEN: dict[str, type[Duration] | type[Size]] = {"Duration": Duration, "Size": Size}


def _parse_written(instance: object) -> None:
    """Durations and sizes given as plain text (code that builds a section itself) become
    parsed values too: every reader can use `.ms` and `.bytes`."""
    for f in dataclasses.fields(instance):  # type: ignore[arg-type]
        kind = _WRITTEN.get(str(f.type))
        value = getattr(instance, f.name)
        if kind is not None and not isinstance(value, kind):
            object.__setattr__(instance, f.name, kind(value))


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    bootstrap_servers: str = "127.0.0.1:9092"
    group_id: str = "newsdedup"
    input_topic: str = "news.raw"
    output_topic: str = "news.decisions"
    dlq_topic: str = "news.dlq"
    delivery: str = "at_least_once"
    # Static per instance so a restarted instance fences its own zombie; empty = "<group_id>-0".
    transactional_id: str = ""
    batch_max_messages: int = 500
    # How long a poll waits to fill a batch. An article of a live feed waits up to this long
    # before its batch starts, so it bounds latency from below; a busy feed fills batches of
    # batch_max_messages without waiting. At 100/s, 20 ms gave a p50 of 40-52 ms, 100 ms 89-100.
    batch_max_wait: Duration = Duration("20ms")
    # Partitions of the output and DLQ topics when the service creates them; 0 = as many as the
    # input topic has (keeps per-partition order visible downstream).
    create_partitions: int = 0
    # -1 lets the broker choose (default.replication.factor): right for one broker and for many.
    create_replication_factor: int = -1
    # Where to read a partition with no committed offset, or whose committed offset the broker
    # no longer holds (retention deleted it unread; the service then logs and counts the loss).
    auto_offset_reset: str = "earliest"
    # A clean stop leaves the consumer group (offset resets work at once); false keeps this
    # static member, and its partitions, for a restart within session.timeout.ms.
    leave_group_on_stop: bool = True
    client: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _parse_written(self)


@dataclass(frozen=True, slots=True)
class InputConfig:
    """Field names of the feed's JSON messages (upstream feeds differ) and the size limit."""

    id_field: str = "id"
    title_field: str = "title"
    content_field: str = "content"
    url_field: str = "url"
    source_field: str = "source"
    lang_field: str = "lang"
    published_at_field: str = "published_at"
    max_message_bytes: int = 1_000_000


@dataclass(frozen=True, slots=True)
class IndexConfig:
    path: str = "./state"
    max_distance: int = 12
    segment: Duration = Duration("1h")
    retention: Duration = Duration("72h")
    future_skew: Duration = Duration("5m")
    expected_articles: int = 1_000_000
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES
    memory: Size = Size("256MiB")

    def __post_init__(self) -> None:
        _parse_written(self)


# The segmenters a fingerprint can be made with (consumer/fingerprint/terms.py).
ENGINES = ("rjieba", "jieba")


def check_fingerprint_options(
    engine: str, title_weight: float, max_terms: int | None, max_chars: int
) -> None:
    """The one check of what shapes a fingerprint, for the configuration as it is read and for
    code that builds fingerprint options itself (max_terms None or 0: all terms)."""
    if engine not in ENGINES:
        raise ConfigError(
            f"option [fingerprint] engine must be one of {', '.join(ENGINES)}: {engine!r}"
        )
    if not title_weight >= 0:  # NaN too
        raise ConfigError("option [fingerprint] title_weight must be 0 or more")
    if max_terms is not None and max_terms < 0:
        raise ConfigError("option [fingerprint] max_terms must be 0 (all) or more")
    if max_chars < 1:
        raise ConfigError("option [fingerprint] max_chars must be 1 or more")


@dataclass(frozen=True, slots=True)
class FingerprintConfig:
    engine: str = "rjieba"
    idf_path: str = ""
    title_weight: float = 1.0
    max_terms: int = 0
    max_chars: int = 100_000
    convert_traditional: bool = True


@dataclass(frozen=True, slots=True)
class MatchConfig:
    # README "Accuracy": why a candidate is verified and short texts match by letters.
    min_jaccard: float = 0.5
    short_text_chars: int = 80
    unverifiable_distance: int = 3
    # What the sketch settles alone, and the second candidate channel (README "Accuracy").
    verify_margin: float = 0.15
    band_min_shared: int = 2
    band_candidates: int = 4
    # Shingles this many stories of the window carry are a template's (docs/accuracy.md).
    boilerplate_min_articles: int = 3
    # Only with max_distance above far_distance: benchmarks/history/2026-11-25.md,
    # "Sketch format 2".
    far_distance: int = 12
    far_min_jaccard: float = 0.6
    # Latin-script sentences (MSRP): the same section, "Short texts and sentences".
    sentence_chars: int = 200
    sentence_min_jaccard: float = 0.7


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    workers: int = 0  # fingerprinting processes; 0 = one per core
    # /healthz fails when the loop has not turned for this long.
    stuck_after: Duration = Duration("60s")
    # Past this after SIGTERM, exit without finishing the batch.
    stop_timeout: Duration = Duration("8s")
    # An assigned partition with nothing fetched, not known to be at its end, is waited for
    # this long before the others' articles are decided without it (consumer/stream/eventtime.py).
    partition_idle: Duration = Duration("2s")
    # Records of one partition that can arrive behind later-dated ones (a producer's retried
    # batch) and still be decided in event-time order: each record waits for this many behind
    # it while the broker holds more (consumer/stream/eventtime.py). 0: offset order.
    reorder_window: int = 1000
    # At a partition's end, an article older than [index] retention waits this long for ones
    # still to come: a retried batch lands moments after the batches sent after it.
    reorder_hold: Duration = Duration("2s")

    def __post_init__(self) -> None:
        _parse_written(self)


@dataclass(frozen=True, slots=True)
class ScaleoutConfig:
    """The topics between `run --role fingerprint` and `run --role decide` (README, "Scale-out")."""

    internal_topic: str = "news.fingerprints"
    changelog_topic: str = "news.index-changelog"
    # Partitions of both when created: the most decide instances that can share the work.
    partitions: int = 6
    # Article field naming the dedup domain (language, tenant…); "" = one domain for the feed.
    domain_field: str = ""
    # Names this instance's transactional producers; "" = the host name. Unique per instance.
    instance_id: str = ""
    # Articles a decide instance holds while one feed partition's forwarded records lag behind
    # another's (consumer/scaleout/sequencing.py); past it the earliest goes without waiting.
    reorder_buffer: int = 50_000


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    listen: str = "0.0.0.0:9108"


@dataclass(frozen=True, slots=True)
class LogConfig:
    level: str = "INFO"
    format: str = "text"  # or "json"


@dataclass(frozen=True, slots=True)
class Config:
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    input: InputConfig = field(default_factory=InputConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    fingerprint: FingerprintConfig = field(default_factory=FingerprintConfig)
    match: MatchConfig = field(default_factory=MatchConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    scaleout: ScaleoutConfig = field(default_factory=ScaleoutConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log: LogConfig = field(default_factory=LogConfig)


SECTIONS: dict[str, type] = get_type_hints(Config)


def load_config(
    path: str | os.PathLike | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Config:
    """Defaults ← TOML file ← environment ← `overrides` ({section: {option: value}}, as a
    program sets them); validates every value and names the bad one."""
    raw: dict[str, dict[str, Any]] = {}
    if path is not None:
        p = Path(path)
        try:
            with p.open("rb") as f:
                raw = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"config file {p} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {p} is not valid TOML: {e}") from None
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    _merge_environment(raw, os.environ if environ is None else environ)
    for section, options in (overrides or {}).items():
        merged = raw.setdefault(section, {})
        if isinstance(merged, dict):
            merged.update(options)
    return _build(raw)


def _merge_environment(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        section, _, key = rest.partition("_")
        if section not in SECTIONS or not key:
            raise ConfigError(
                f"environment variable {name}: no such section {section!r} "
                f"(sections: {', '.join(SECTIONS)})"
            )
        table = raw.setdefault(section, {})
        if section == "kafka" and key.startswith("client_"):
            # librdkafka keys are dotted (sasl.password); variables cannot hold dots.
            table.setdefault("client", {})[key[len("client_") :].replace("_", ".")] = value
        else:
            table[key] = value


def _build(raw: dict[str, Any]) -> Config:
    sections = {}
    for section, value in raw.items():
        if section not in SECTIONS:
            raise ConfigError(f"unknown config section [{section}]{_suggest(section, SECTIONS)}")
        if not isinstance(value, dict):
            raise ConfigError(f"config [{section}] must be a table")
        sections[section] = _build_section(section, SECTIONS[section], value)
    config = Config(**sections)
    _validate(config)
    return config


def _build_section(section: str, cls: type, values: dict[str, Any]) -> Any:
    hints = get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in hints:
            raise ConfigError(f"unknown option [{section}] {key}{_suggest(key, hints)}")
        kwargs[key] = _coerce(f"[{section}] {key}", hints[key], value)
    return cls(**kwargs)


def _coerce(name: str, kind: Any, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"option {name} must be true or false, got {value!r}")
    if kind is int:
        if isinstance(value, bool):
            raise ConfigError(f"option {name} must be an integer, got {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"option {name} must be an integer, got {value!r}") from None
    if kind is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"option {name} must be a number, got {value!r}") from None
    if kind in (Duration, Size):
        try:
            return kind(value)
        except ValueError as e:
            raise ConfigError(f"option {name}: {e}") from None
    if kind is str:
        if isinstance(value, dict | list):
            raise ConfigError(f"option {name} must be a string, got {value!r}")
        return str(value)
    if getattr(kind, "__origin__", None) is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"option {name} must be a table of strings")
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
    raise ConfigError(f"option {name} has an unsupported type")


def _validate(config: Config) -> None:
    """Every option's bounds, section by section, in the order a user reads the file (the
    first one broken is the one reported)."""
    _validate_kafka(config.kafka)
    _check(config.input.max_message_bytes > 0, "option [input] max_message_bytes must be positive")
    idx = config.index
    _check(0 <= idx.max_distance <= 16, "option [index] max_distance must be from 0 to 16")
    _check(idx.expected_articles > 0, "option [index] expected_articles must be positive")
    _check(
        idx.max_table_bytes >= table_bytes_per_article(1),
        f"option [index] max_table_bytes must be at least {table_bytes_per_article(1)}, one "
        "table's bytes per article (below it every search would scan every row)",
    )
    _check(bool(idx.path.strip()), "option [index] path must not be empty")
    fp = config.fingerprint
    check_fingerprint_options(fp.engine, fp.title_weight, fp.max_terms, fp.max_chars)
    _validate_match(config.match)
    _validate_scaleout(config.kafka, config.scaleout)
    _validate_service_log_metrics(config)
    # Durations and sizes were parsed as they were read (_coerce).
    _check(idx.segment.ms > 0, "option [index] segment must be positive")
    _check(
        idx.retention.ms >= idx.segment.ms,
        "option [index] retention must be at least one segment",
    )


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _validate_kafka(k: KafkaConfig) -> None:
    _check(k.delivery in DELIVERY_MODES, f"option [kafka] delivery must be one of {DELIVERY_MODES}")
    for key in ("bootstrap_servers", "group_id", "input_topic", "output_topic", "dlq_topic"):
        _check(bool(getattr(k, key).strip()), f"option [kafka] {key} must not be empty")
    _check(
        len({k.input_topic, k.output_topic, k.dlq_topic}) == 3,
        "options [kafka] input_topic, output_topic and dlq_topic must be three different topics",
    )
    _check(k.batch_max_messages >= 1, "option [kafka] batch_max_messages must be at least 1")
    _check(k.create_partitions >= 0, "option [kafka] create_partitions must be 0 or more")
    _check(
        k.auto_offset_reset in OFFSET_RESETS,
        f"option [kafka] auto_offset_reset must be one of {OFFSET_RESETS}",
    )
    reserved = {
        "bootstrap.servers",
        "group.id",
        "transactional.id",
        "enable.auto.commit",
        "auto.offset.reset",
    }
    clash = reserved & set(k.client)
    _check(
        not clash, f"option [kafka.client] {', '.join(sorted(clash))}: set it in [kafka] instead"
    )


def _validate_match(m: MatchConfig) -> None:
    _check(0 <= m.min_jaccard <= 1, "option [match] min_jaccard must be from 0 to 1")
    _check(0 <= m.far_min_jaccard <= 1, "option [match] far_min_jaccard must be from 0 to 1")
    _check(0 <= m.verify_margin <= 1, "option [match] verify_margin must be from 0 to 1")
    _check(1 <= m.band_min_shared <= 16, "option [match] band_min_shared must be from 1 to 16")
    _check(m.band_candidates >= 0, "option [match] band_candidates must be 0 or more")
    _check(
        m.boilerplate_min_articles >= 0, "option [match] boilerplate_min_articles must be 0 or more"
    )
    _check(0 <= m.far_distance <= 64, "option [match] far_distance must be from 0 to 64")
    _check(m.sentence_chars >= 0, "option [match] sentence_chars must be 0 or more")
    _check(
        0 <= m.sentence_min_jaccard <= 1, "option [match] sentence_min_jaccard must be from 0 to 1"
    )
    _check(
        0 <= m.short_text_chars <= LETTERS_KEY_CHARS,
        f"option [match] short_text_chars must be from 0 to {LETTERS_KEY_CHARS}",
    )
    _check(
        0 <= m.unverifiable_distance <= 64,
        "option [match] unverifiable_distance must be from 0 to 64",
    )


def _validate_scaleout(k: KafkaConfig, so: ScaleoutConfig) -> None:
    _check(so.partitions >= 1, "option [scaleout] partitions must be at least 1")
    _check(so.reorder_buffer >= 1, "option [scaleout] reorder_buffer must be at least 1")
    for key in ("internal_topic", "changelog_topic"):
        _check(bool(getattr(so, key).strip()), f"option [scaleout] {key} must not be empty")
    _check(
        len({k.input_topic, k.output_topic, k.dlq_topic, so.internal_topic, so.changelog_topic})
        == 5,
        "options [scaleout] internal_topic and changelog_topic must differ from each other and "
        "from the [kafka] topics",
    )


def _validate_service_log_metrics(config: Config) -> None:
    _check(config.service.workers >= 0, "option [service] workers must be 0 (one per core) or more")
    _check(config.service.reorder_window >= 0, "option [service] reorder_window must be 0 or more")
    _check(
        config.log.level.upper() in ("DEBUG", "INFO", "WARNING", "ERROR"),
        "option [log] level must be DEBUG, INFO, WARNING or ERROR",
    )
    _check(config.log.format in ("text", "json"), "option [log] format must be text or json")
    _, sep, port = config.metrics.listen.rpartition(":")
    _check(
        bool(sep) and port.isdigit() and int(port) < 65536,
        "option [metrics] listen must be HOST:PORT",
    )


def _suggest(word: str, choices: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def as_toml_defaults() -> dict[str, dict[str, Any]]:
    """The built-in defaults as nested dicts, in the shape of config/newsdedup.toml."""
    return {name: dataclasses.asdict(getattr(Config(), name)) for name in SECTIONS}
