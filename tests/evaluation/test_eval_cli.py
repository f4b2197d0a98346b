"""`newsdedup eval` end to end on a small synthetic corpus, with every baseline and a stand-in
for `newsdedup check` that honours the same command-line contract (exact matches only)."""

from __future__ import annotations

import gzip
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from random import Random

import pytest

from consumer import cli
from consumer.cli.eval import DEFAULT_BASELINES
from consumer.config import load_config
from consumer.evaluation import check
from consumer.evaluation.baselines import BASELINES
from consumer.evaluation.feed import build_feed, parse_published_at, silver_path

# The stand-in: `check IN -o OUT --state DIR`, one decision per line, exact text matches only.
FAKE_CHECK = """
import json, os, sys
args = sys.argv[1:]
src, out = args[0], args[args.index("-o") + 1]
# Records the window it was given, as the real command reads it from the environment.
with open(out + ".window", "w") as w:
    w.write(os.environ.get("NEWSDEDUP_INDEX_RETENTION", "configured"))
first = {}
with open(src, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
    for line in f:
        a = json.loads(line)
        key = (a["title"], a["content"])
        hit = first.get(key)
        first.setdefault(key, a["id"])
        d = {"id": a["id"], "decision": "duplicate" if hit else "unique",
             "matched_id": hit, "cluster_id": hit or a["id"], "distance": 0 if hit else None}
        g.write(json.dumps(d) + "\\n")
"""


def _sentence(rng: Random) -> str:
    # Random common CJK characters: unrelated synthetic articles share almost no 5-gram.
    return "".join(chr(rng.randrange(0x4E00, 0x4E00 + 3000)) for _ in range(rng.randint(15, 25)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 articles over 30 days, 3 exact and 3 lightly edited reposts, and a silver list."""
    rng = Random(1)
    articles = []
    for i in range(60):
        body = "\n".join("。".join(_sentence(rng) for _ in range(3)) + "。" for _ in range(5))
        articles.append({"id": f"syn-{i}", "title": _sentence(rng)[:12], "content": body})
    for n, i in enumerate((3, 10, 20)):
        articles.append({**articles[i], "id": f"syn-exact-{n}"})
    for n, i in enumerate((5, 15, 25)):
        edited = articles[i]["content"].replace("。", "，", 2) + _sentence(rng) + "。"
        articles.append({**articles[i], "id": f"syn-edited-{n}", "content": edited})
    for i, a in enumerate(articles):
        a["published_at"] = f"2026-10-{1 + i % 30:02d}"
    path = tmp_path_factory.mktemp("corpus") / "zh_synthetic.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for a in articles:
            f.write(json.dumps(a, ensure_ascii=False) + "\n")
    silver = [
        {"a": f"syn-{i}", "b": f"syn-exact-{n}", "jaccard": 1.0} for n, i in enumerate((3, 10, 20))
    ]
    silver += [
        {"a": f"syn-{i}", "b": f"syn-edited-{n}", "jaccard": 0.9} for n, i in enumerate((5, 15, 25))
    ]
    silver.append({"a": "syn-1", "b": "syn-2", "jaccard": 0.5})  # a wrong candidate: dropped
    with gzip.open(silver_path(path), "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(s) + "\n" for s in silver)
    return path


@pytest.fixture
def fake_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "fake_check.py"
    script.write_text(FAKE_CHECK, encoding="utf-8")
    monkeypatch.setattr(check, "CHECK_COMMAND", (sys.executable, str(script)))


def test_feed_is_ordered_deterministic_and_has_true_pairs(corpus: Path) -> None:
    feed = build_feed(corpus, edits=24, seed=3)
    assert build_feed(corpus, edits=24, seed=3) == feed
    times = [a.published_at for a in feed.articles]
    assert times == sorted(times)
    position = {a.id: i for i, a in enumerate(feed.articles)}
    assert all(position[p.earlier] < position[p.later] for p in feed.pairs)
    kinds = [p.kind for p in feed.pairs]
    assert kinds.count("corpus") == 6  # the wrong silver candidate was recomputed and dropped
    assert len(kinds) == 30 and len(set(kinds)) == 12  # corpus + the 11 kinds for Chinese text
    assert build_feed(corpus, edits=24, seed=4).articles != feed.articles


def test_limit_takes_the_earliest_articles(corpus: Path) -> None:
    feed = build_feed(corpus, limit=10, edits=0)
    assert len(feed.articles) == 10
    assert max(a.published_at for a in feed.articles) == datetime(2026, 10, 4, tzinfo=UTC)


def test_published_at_formats() -> None:
    assert parse_published_at("2022-09-24") == datetime(2022, 9, 24, tzinfo=UTC)
    assert parse_published_at("2026-11-22T10:00:00+08:00") == datetime(2026, 11, 22, 2, tzinfo=UTC)
    assert parse_published_at("26-FEB-1987 15:01:01.79") == datetime(
        1987, 2, 26, 15, 1, 1, 790_000, tzinfo=UTC
    )
    assert parse_published_at("27-MAR-1987 00:03:35.68F") is not None
    assert parse_published_at(1_700_000_000_000) == datetime.fromtimestamp(1_700_000_000, UTC)
    assert parse_published_at("") is None
    assert parse_published_at("soon") is None


@pytest.mark.usefixtures("fake_check")
def test_eval_end_to_end_with_baselines(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "pr.png"
    argv = ["eval", "--data", str(corpus), "--edits", "24", "--json", "--plot", str(png)]
    assert cli.main(argv) == 0  # every baseline, by default
    report = json.loads(capsys.readouterr().out)
    assert report["feed"]["corpus_articles"] == 66
    assert report["feed"]["edited_copies"] == 24
    systems = {s["system"]: s for s in report["systems"]}
    assert list(systems) == ["newsdedup", "newsdedup-whole", *DEFAULT_BASELINES]
    # The stand-in finds exactly the 3 exact reposts: always right, recall 3 of 30 pairs.
    for run in ("newsdedup", "newsdedup-whole"):
        assert systems[run]["precision"] == 1.0
        assert systems[run]["recall"] == pytest.approx(3 / 30)
    for minhash in ("minhash", "minhash-verified", "rensa", "rensa-verified"):
        assert systems[minhash]["precision"] == 1.0
        assert systems[minhash]["recall"] >= 0.9
    assert systems["simhash"]["precision"] == 1.0
    assert systems["simhash"]["recall_by_kind"]["punctuation"]["recall"] == 1.0
    # Speed per CPU-second for every row: the stand-in check's CPU is its process's.
    for s in systems.values():
        assert s["cpu_seconds"] > 0
        # (cpu_seconds is rounded to the millisecond in the report)
        assert 90 / s["articles_per_cpu_second"] == pytest.approx(s["cpu_seconds"], abs=1e-3)
    assert png.stat().st_size > 10_000

    assert cli.main([*argv[:-2], "--baselines", "none", "--edits", "5"]) == 0
    text = capsys.readouterr().out
    assert "newsdedup" in text and "minhash" not in text and "simhash" not in text


@pytest.mark.usefixtures("fake_check")
def test_text_report_names_every_minhash_row(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = "minhash,minhash-verified,rensa,rensa-verified"
    assert cli.main(["eval", "--data", str(corpus), "--edits", "5", "--baselines", rows]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(ln for ln in lines if ln.startswith("system"))
    assert header.split()[-2:] == ["art/CPU-s", "seconds"]
    named = [ln.split()[0] for ln in lines[lines.index(header) + 1 :] if ln.strip()][:6]
    assert named == ["newsdedup", "newsdedup-whole", *rows.split(",")]


def test_the_default_baselines_are_all_of_them() -> None:
    assert tuple(BASELINES) == DEFAULT_BASELINES


def test_the_whole_feed_run_gets_a_window_holding_the_feed(corpus: Path) -> None:
    articles = build_feed(corpus, edits=0).articles
    window = check.whole_feed_window(articles)
    # 30 days of articles: 29 days between the first and the last, plus an hour.
    assert window == {
        "NEWSDEDUP_INDEX_RETENTION": f"{29 * 24 + 1}h",
        "NEWSDEDUP_INDEX_SEGMENT": "10h",
        "NEWSDEDUP_INDEX_EXPECTED_ARTICLES": str(len(articles)),
    }
    assert load_config(None, window).index.retention == f"{29 * 24 + 1}h"


@pytest.mark.usefixtures("fake_check")
def test_each_run_gets_its_window(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = check.subprocess.run

    def run(command: list[str], **kwargs: object):
        done = real(command, **kwargs)
        out = Path(command[command.index("-o") + 1] + ".window")
        seen.append(out.read_text())
        return done

    monkeypatch.setattr(check.subprocess, "run", run)
    assert cli.main(["eval", "--data", str(corpus), "--edits", "5", "--baselines", "none"]) == 0
    whole = check.whole_feed_window(build_feed(corpus, edits=5).articles)
    assert seen == ["configured", whole["NEWSDEDUP_INDEX_RETENTION"]]


def test_eval_text_report_and_failing_check(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(check, "CHECK_COMMAND", (sys.executable, "-c", "import sys; sys.exit(3)"))
    assert cli.main(["eval", "--data", str(corpus), "--edits", "5", "--baselines", "simhash"]) == 1
    captured = capsys.readouterr()
    assert f"{'newsdedup':<16} failed: check exited 3" in captured.out
    assert f"{'newsdedup-whole':<16} failed: check exited 3" in captured.out
    assert "simhash" in captured.out and "recall by kind of pair" in captured.out
    assert "newsdedup failed" in captured.err


def test_unknown_baseline_is_a_user_error(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "--data", str(corpus), "--baselines", "lsh"]) == 2
    assert "unknown lsh" in capsys.readouterr().err


def test_through_kafka_without_a_broker_is_a_user_error_before_anything_runs(
    corpus: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The installed eval has no broker script of its own: it is given one, or a broker."""
    argv = ["eval", "--data", str(corpus), "--baselines", "none", "--through-kafka"]
    assert cli.main(argv) == 2
    assert "--kafka-local" in capsys.readouterr().err
    assert cli.main([*argv, "--kafka-local", str(tmp_path / "kafka-local")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_contract_violations_are_reported(corpus: Path) -> None:
    articles = build_feed(corpus, limit=2, edits=0).articles
    line = json.dumps({"id": articles[0].id, "decision": "unique", "matched_id": None})
    with pytest.raises(check.ContractError, match="1 decision lines for 2"):
        check.parse_decisions([line], articles)
    bad = json.dumps({"id": articles[1].id, "decision": "near_duplicate", "matched_id": None})
    with pytest.raises(check.ContractError, match="without a matched_id"):
        check.parse_decisions([line, bad], articles)
    with pytest.raises(check.ContractError, match="is for"):
        check.parse_decisions([line, line], articles)


@pytest.mark.usefixtures("fake_check")
def test_pairs_report_runs_every_baseline_in_aligned_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = Random(2)
    rows = []
    for i in range(10):
        a = "。".join(_sentence(rng) for _ in range(3))
        # Even pairs: the same sentence twice (label 1); odd ones: unrelated (label 0).
        rows.append({"id": i, "a": a, "b": a if i % 2 == 0 else _sentence(rng), "label": 1 - i % 2})
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    assert cli.main(["eval", "--pairs", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(ln for ln in lines if ln.startswith("system"))
    table = lines[lines.index(header) + 1 :]
    assert [ln.split()[0] for ln in table] == ["newsdedup", *DEFAULT_BASELINES]
    # Every row's precision sits under the header's, whatever the system's name.
    column = header.index("precision") + len("precision")
    assert all(ln[column - 5 : column] in ("1.000", "    —") for ln in table)


@pytest.mark.usefixtures("fake_check")
def test_cluster_quality_for_every_system(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--data", str(corpus), "--edits", "24", "--baselines", "minhash,simhash"]
    assert cli.main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # 6 corpus reposts and 24 copies of 66 articles; copies of one article make one story.
    assert report["feed"]["clustered_articles"] <= 66 + 24
    assert 0 < report["feed"]["true_clusters"] <= 30
    for s in report["systems"]:
        c = s["clusters"]
        assert 0 <= c["agreeing_pairs"] <= min(c["predicted_pairs"], c["true_pairs"])
        assert -1 <= c["adjusted_rand_index"] <= 1
    systems = {s["system"]: s["clusters"] for s in report["systems"]}
    # The stand-in joins only exact reposts, named by its cluster_id: never wrongly.
    assert systems["newsdedup"]["pair_precision"] == 1.0
    assert systems["newsdedup"]["pair_recall"] < systems["minhash"]["pair_recall"]

    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index(next(ln for ln in lines if ln.startswith("clusters (true:")))
    assert lines[header + 1].split() == ["system", "pair-prec", "pair-rec", "ARI", "clusters"]
    named = [ln.split()[0] for ln in lines[header + 2 : header + 6]]
    assert named == ["newsdedup", "newsdedup-whole", "minhash", "simhash"]
