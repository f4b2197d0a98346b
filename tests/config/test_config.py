"""Configuration: defaults, file and environment layering, one clear error per bad option."""

import tomllib
from pathlib import Path

import pytest

from consumer.config import as_toml_defaults, load_config
from consumer.errors import ConfigError
from consumer.quantities import parse_duration_ms, parse_size_bytes

REPO = Path(__file__).resolve().parents[2]


def test_shipped_toml_documents_exactly_the_builtin_defaults():
    with (REPO / "config" / "newsdedup.toml").open("rb") as f:
        shipped = tomllib.load(f)
    assert shipped == as_toml_defaults()


def test_file_overrides_defaults_and_environment_overrides_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[kafka]\ngroup_id = "from-file"\n[index]\nmax_distance = 5\n')
    config = load_config(path, environ={"NEWSDEDUP_INDEX_MAX_DISTANCE": "7"})
    assert config.kafka.group_id == "from-file"
    assert config.index.max_distance == 7
    assert config.kafka.input_topic == "news.raw"


def test_client_passthrough_from_file_and_environment(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        '[kafka.client]\n"security.protocol" = "SASL_SSL"\n"socket.timeout.ms" = 5000\n'
    )
    env = {"NEWSDEDUP_KAFKA_CLIENT_SASL_USERNAME": "alice"}
    client = load_config(path, environ=env).kafka.client
    assert client == {
        "security.protocol": "SASL_SSL",
        "socket.timeout.ms": "5000",
        "sasl.username": "alice",
    }


@pytest.mark.parametrize(
    ("toml", "env", "names"),
    [
        ("[index]\nmax_distanc = 3\n", {}, "max_distanc (did you mean max_distance?)"),
        ("[kafak]\n", {}, "[kafak] (did you mean kafka?)"),
        ("", {"NEWSDEDUP_INDEX_MAX_DISTANCE": "three"}, "[index] max_distance"),
        ('[kafka]\ndelivery = "twice"\n', {}, "[kafka] delivery"),
        ('[index]\nretention = "forever"\n', {}, "[index] retention"),
        ('[metrics]\nlisten = "9108"\n', {}, "[metrics] listen"),
        ('[kafka.client]\n"group.id" = "x"\n', {}, "group.id"),
        ('[kafka]\nauto_offset_reset = "none"\n', {}, "[kafka] auto_offset_reset"),
        ('[kafka.client]\n"auto.offset.reset" = "latest"\n', {}, "set it in [kafka] instead"),
        ("", {"NEWSDEDUP_KAFKA_LEAVE_GROUP_ON_STOP": "maybe"}, "[kafka] leave_group_on_stop"),
        ("", {"NEWSDEDUP_NOPE_X": "1"}, "NEWSDEDUP_NOPE_X"),
        ('[kafka]\noutput_topic = "news.raw"\n', {}, "three different topics"),
        # Past 256 characters a text carries no letters key to match a short text by.
        ("[match]\nshort_text_chars = 300\n", {}, "[match] short_text_chars must be from 0 to 256"),
        ("[index]\nmax_table_bytes = 12\n", {}, "[index] max_table_bytes must be at least 13"),
        ("not toml [", {}, "not valid TOML"),
    ],
)
def test_bad_option_names_itself_in_one_line(tmp_path, toml, env, names):
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=env)
    message = str(info.value)
    assert names in message
    assert "\n" not in message


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", environ={})


def test_durations_and_sizes():
    assert parse_duration_ms("1h") == 3_600_000
    assert parse_duration_ms("500ms") == 500
    assert parse_duration_ms("90") == 90_000
    assert parse_duration_ms("3d") == 3 * 86_400_000
    assert parse_size_bytes("256MiB") == 256 * 2**20
    with pytest.raises(ValueError):
        parse_duration_ms("1 fortnight")
