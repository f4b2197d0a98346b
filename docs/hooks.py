"""MkDocs hooks: the pages generated from the repository, so the site cannot drift from it.

- benchmarks.md is BENCHMARKS.md at the repository's root, and benchmarks/history/*.md its
  dated history, pages outside nav that BENCHMARKS.md's list links to, and
  benchmarks/plots/*.svg the drawings it shows;
- the CLI reference is `--help` of every command, from consumer.cli's argparse parsers;
- the library's API reference is the docstrings and signatures of what `newsdedup` exports;
- the configuration page embeds config/newsdedup.toml, and its option table is checked
  against that file: an option missing on either side, or a default that differs, fails
  the build (MkDocs counts the warning; `mkdocs build --strict` stops on it).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tomllib
from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

ROOT = Path(__file__).resolve().parent.parent
CONFIG_FILE = ROOT / "config" / "newsdedup.toml"
HISTORY = ROOT / "benchmarks" / "history"
PLOTS = ROOT / "benchmarks" / "plots"
log = logging.getLogger("mkdocs.hooks.newsdedup")


def on_files(files, config):
    # The same relative paths as in the repository, so BENCHMARKS.md's links work in both.
    for path in sorted(PLOTS.glob("*.svg")):
        files.append(
            File.generated(config, f"benchmarks/plots/{path.name}", abs_src_path=str(path))
        )
    for path in sorted(HISTORY.glob("*.md")):
        files.append(
            File.generated(
                config,
                f"benchmarks/history/{path.name}",
                abs_src_path=str(path),
                inclusion=InclusionLevel.NOT_IN_NAV,
            )
        )
    return files


def on_page_read_source(page, config):
    if page.file.src_uri == "benchmarks.md":
        markdown = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
        # A folder is no page on the site: its link becomes its text (the list of its files
        # follows it).
        return re.sub(r"\[([^\]]*)\]\(benchmarks/history/\)", r"\1", markdown)
    return None


def on_page_markdown(markdown, page, config, files):
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    if "<!-- library-reference -->" in markdown:
        markdown = markdown.replace("<!-- library-reference -->", library_reference())
    if "<!-- config-file -->" in markdown:
        for problem in config_table_problems(markdown):
            log.warning("%s: %s", page.file.src_uri, problem)
        toml = CONFIG_FILE.read_text(encoding="utf-8")
        markdown = markdown.replace("<!-- config-file -->", f"```toml\n{toml}```")
    return markdown


def library_reference() -> str:
    """Each public class of the library API, its methods and their docstrings."""
    import inspect

    sys.path.insert(0, str(ROOT))
    import consumer.library as api

    def signature(obj: object) -> str:
        text = str(inspect.signature(obj))
        return text.replace("consumer.records.decision.", "").replace("'", "")

    parts = []
    for name in ("Deduplicator", "Decisions", "Explanation", "InvalidArticle", "Decision"):
        cls = getattr(api, name)
        parts.append(f"### `{name}{signature(cls)}`\n\n{inspect.getdoc(cls) or ''}\n")
        for method, member in vars(cls).items():
            if method.startswith("_") or not callable(member) or not member.__doc__:
                continue
            parts.append(f"#### `{name}.{method}{signature(member)}`\n\n{inspect.getdoc(member)}\n")
    return "\n".join(parts)


def cli_reference() -> str:
    # A fixed width, so the page does not depend on the terminal that builds it.
    os.environ["COLUMNS"] = "100"
    sys.path.insert(0, str(ROOT))
    from consumer.cli import build_parser

    sections = []

    def walk(parser: argparse.ArgumentParser, name: str, level: int) -> None:
        sections.append(f"{'#' * level} `{name}`\n\n```text\n{parser.format_help()}```\n")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}", min(level + 1, 4))

    walk(build_parser(), "newsdedup", 3)
    return "\n".join(sections)


def config_table_problems(markdown: str) -> list[str]:
    """Differences between the page's option table and config/newsdedup.toml."""
    defaults = _flatten(tomllib.loads(CONFIG_FILE.read_text(encoding="utf-8")))
    documented: dict[str, str | None] = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`["):
            continue
        section = re.match(r"`\[([\w.]+)\]", cells[0]).group(1)
        keys = re.findall(r"`(?:\[[\w.]+\] )?(\w+)`", cells[0])
        if not keys:  # a whole table passed through, e.g. [kafka.client]
            documented[section] = None
            continue
        values = re.findall(r"`([^`]*)`", cells[1])
        for i, key in enumerate(keys):
            documented[f"{section}.{key}"] = values[i] if len(values) == len(keys) else None
    problems = []
    for option, default in defaults.items():
        if option not in documented:
            problems.append(
                f"[{option.rsplit('.', 1)[0]}] {option.rsplit('.', 1)[1]} is in "
                f"{CONFIG_FILE.name} but not in the option table"
            )
        elif documented[option] is not None and documented[option] != _shown(default):
            problems.append(
                f"{option}: the table says {documented[option]!r}, "
                f"{CONFIG_FILE.name} says {_shown(default)!r}"
            )
    for option in documented:
        if option not in defaults:
            problems.append(f"{option} is in the option table but not in {CONFIG_FILE.name}")
    return problems


def _flatten(table: dict, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}.") if value else {name: value})
        else:
            flat[name] = value
    return flat


def _shown(value: object) -> str:
    """A default as the table writes it: `""`, `true`, `12`, `100ms`."""
    if value == "":
        return '""'
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
