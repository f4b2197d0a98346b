"""`newsdedup fingerprint`, `hamming`, `build-idf` and `bench fingerprint` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from consumer.corpus import shared_data_dir
from consumer.fingerprint.fingerprinter import Fingerprinter, FingerprintOptions

REPO_ROOT = Path(__file__).resolve().parents[2]
HKCNEWS = shared_data_dir() / "zh_hkcnews_2017_2022.jsonl.gz"

ARTICLES = [
    {"id": "a1", "title": "颱風消息", "content": "香港天文台今日發出八號烈風信號，學校停課。"},
    {
        "id": "a2",
        "title": "Rates",
        "content": "The central bank raised interest rates by 0.25 points.",
    },
    {"id": "a3", "content": "<p>立法会<b>今日</b>三读通过条例草案</p>"},
]


def newsdedup(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "consumer.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )


@pytest.fixture
def articles_file(tmp_path: Path) -> Path:
    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in ARTICLES))
    return path


def test_fingerprint_jsonl_file(articles_file: Path) -> None:
    done = newsdedup("fingerprint", str(articles_file))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    fingerprinter = Fingerprinter()
    for line, article in zip(lines, ARTICLES, strict=True):
        fp = fingerprinter.fingerprint(article.get("title", ""), article["content"])
        assert line == {
            "id": article["id"],
            "simhash": fp.simhash_hex,
            "content_hash": fp.content_hash_hex,
        }


def test_fingerprint_explain_and_reference_engine(articles_file: Path) -> None:
    fast = newsdedup("fingerprint", "--explain", str(articles_file))
    reference = newsdedup("fingerprint", "--explain", "--engine", "jieba", str(articles_file))
    assert fast.returncode == reference.returncode == 0, fast.stderr + reference.stderr
    assert fast.stdout == reference.stdout
    first = json.loads(fast.stdout.splitlines()[0])
    terms = first["terms"]
    assert [t for t, _ in terms][:1] and all(isinstance(w, float) for _, w in terms)
    assert [w for _, w in terms] == sorted((w for _, w in terms), reverse=True)
    assert "香港" in dict(terms)  # Traditional input, Simplified terms


def test_fingerprint_jsonl_on_stdin(articles_file: Path) -> None:
    done = newsdedup("fingerprint", stdin=articles_file.read_text())
    assert done.returncode == 0, done.stderr
    assert done.stdout == newsdedup("fingerprint", str(articles_file)).stdout


def test_plain_text_on_stdin_gives_one_line() -> None:
    done = newsdedup("fingerprint", stdin="香港天文台今日發出八號烈風信號。\n學校停課。\n")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    record = json.loads(line)
    assert (
        record["id"] is None and len(record["simhash"]) == 16 and len(record["content_hash"]) == 32
    )


def test_plain_text_with_nothing_to_fingerprint_is_one_error_line() -> None:
    done = newsdedup("fingerprint", stdin="!!! ??? 😀\n")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("newsdedup: error: nothing to fingerprint")
    assert done.stderr.count("\n") == 1


def test_bad_articles_get_an_error_line_and_the_rest_go_on(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    rows = [{"id": "x", "content": "。。。"}, {"id": "y", "content": 42}, ARTICLES[0]]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    done = newsdedup("fingerprint", str(path))
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["x", "y", "a1"]
    assert "nothing to fingerprint" in lines[0]["error"]
    assert "'content' must be a string" in lines[1]["error"]
    assert "simhash" in lines[2]
    assert "2 article(s) could not be fingerprinted" in done.stderr


def test_missing_file_is_one_error_line(tmp_path: Path) -> None:
    done = newsdedup("fingerprint", str(tmp_path / "nope.jsonl"))
    assert done.returncode == 2
    assert done.stderr == f"newsdedup: error: {tmp_path / 'nope.jsonl'}: no such file\n"


def test_hamming() -> None:
    assert newsdedup("hamming", "9f3c0a17d2b4e881", "9f3c0a17d2b4e880").stdout == "1\n"
    assert newsdedup("hamming", "0", "ffffffffffffffff").stdout == "64\n"
    bad = newsdedup("hamming", "xyz", "0")
    assert bad.returncode == 2 and "not a fingerprint" in bad.stderr


def test_build_idf_and_use_it(tmp_path: Path, articles_file: Path) -> None:
    table = tmp_path / "idf.txt"
    done = newsdedup("build-idf", str(HKCNEWS), "--limit", "200", "-o", str(table))
    assert done.returncode == 0, done.stderr
    assert "from 200 articles" in done.stderr
    rows = [line.split(" ") for line in table.read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 1000
    assert all(len(row) == 2 and float(row[1]) >= 0 for row in rows)
    assert "香港" in {word for word, _ in rows}  # Simplified, like the fingerprint terms
    with_table = newsdedup("fingerprint", "--idf", str(table), str(articles_file))
    assert with_table.returncode == 0, with_table.stderr
    expected = Fingerprinter(FingerprintOptions(idf_path=str(table))).fingerprint(
        ARTICLES[0]["title"], ARTICLES[0]["content"]
    )
    assert json.loads(with_table.stdout.splitlines()[0])["simhash"] == expected.simhash_hex


def test_bench_fingerprint_json() -> None:
    done = newsdedup("bench", "fingerprint", "--data", str(HKCNEWS), "--limit", "40", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["articles"] == 40
    assert set(report["engines"]) == {"jieba", "rjieba"}
    assert report["engines"]["rjieba"]["docs_per_second"] > 0
    assert report["identical_share"] >= 0.975  # 39 of 40 at least
    assert report["native_equals_python"] is True
    floors = ("rjieba_cut_only", "normalization_only", "opencc_t2s_only")
    assert all(report[f"{floor}_docs_per_cpu_second"] > 0 for floor in floors)
