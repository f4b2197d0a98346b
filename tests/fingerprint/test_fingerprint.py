"""Fingerprints: the contract, determinism, sensible distances on real news, hostile input."""

from __future__ import annotations

import contextlib
import gzip
import json
import pickle
import random
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

import numpy as np
import opencc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.config import FingerprintConfig, InputConfig
from consumer.corpus import shared_data_dir
from consumer.errors import ConfigError, InputError, NewsdedupError
from consumer.fingerprint.fingerprinter import (
    EmptyTextError,
    Fingerprint,
    Fingerprinter,
    FingerprintOptions,
    hamming,
)
from consumer.fingerprint.idf import DocumentFrequencies, bundled_idf_path, load_idf
from consumer.fingerprint.normalize import Normalizer
from consumer.fingerprint.shingles import band_keys, decode_shingles
from consumer.fingerprint.sketch import bin_minima, shingle_hashes
from consumer.fingerprint.terms import hash_terms
from consumer.records import Analyzed, InvalidReason
from consumer.stream.workers import _Worker, fingerprint_options

REPO_ROOT = Path(__file__).resolve().parents[2]


def _articles(name: str, n: int, min_chars: int = 0) -> list[dict]:
    out = []
    with gzip.open(shared_data_dir() / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if len(record["content"]) >= min_chars:
                out.append(record)
                if len(out) == n:
                    break
    return out


@pytest.fixture(scope="module")
def fingerprinter() -> Fingerprinter:
    return Fingerprinter()


@pytest.fixture(scope="module")
def hkcnews() -> list[dict]:
    return _articles("zh_hkcnews_2017_2022", 600, min_chars=300)


# --- the contract -------------------------------------------------------------------------


def test_fingerprint_fields_and_hex(fingerprinter: Fingerprinter) -> None:
    fp = fingerprinter.fingerprint("香港新聞", "立法會今日三讀通過法案，政府發言人表示歡迎。")
    assert isinstance(fp, Fingerprint)
    assert 0 <= fp.simhash < 2**64
    assert len(fp.content_hash) == 16
    assert fp.simhash_hex == f"{fp.simhash:016x}" and len(fp.simhash_hex) == 16
    assert fp.content_hash_hex == fp.content_hash.hex() and len(fp.content_hash_hex) == 32
    assert fp.terms == ()


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_bands_and_shingles_are_of_the_sketchs_shingling(native: bool) -> None:
    fingerprinter = Fingerprinter(native=native)
    title, content = "香港新聞", "立法會今日三讀通過法案，政府發言人表示歡迎。"
    fp = fingerprinter.fingerprint(title, content)
    normalized = "\n".join(Normalizer().many([title, content]))
    kind, hashes = shingle_hashes(normalized)
    assert fp.sketch[:1] == kind == b"C"
    assert fp.bands == band_keys(bin_minima(hashes)) and len(fp.bands) == 64
    decoded_kind, values = decode_shingles(fp.shingles)
    assert decoded_kind == kind
    assert values.tolist() == sorted({int(h) >> 32 for h in hashes})
    english = fingerprinter.fingerprint("Oil prices", "Crude oil rose on Monday as supply fell.")
    assert decode_shingles(english.shingles)[0] == english.sketch[:1] == b"W"
    # The explained path computes them too.
    assert fingerprinter.fingerprint(title, content, explain=True).shingles == fp.shingles


def test_options_are_picklable_and_frozen() -> None:
    options = FingerprintOptions(engine="jieba", title_weight=1.5, max_terms=None)
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(AttributeError):
        options.engine = "rjieba"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [("engine", "spacy"), ("title_weight", -1.0), ("max_terms", 0), ("max_chars", 0)],
)
def test_bad_options_name_the_option(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"\\[fingerprint\\] {field}"):
        FingerprintOptions(**{field: value})


def test_construction_is_fast_once_imported() -> None:
    Fingerprinter()  # the IDF table is loaded once per process and path
    start = time.perf_counter()
    Fingerprinter()
    assert time.perf_counter() - start < 0.5


def test_explain_lists_terms_heaviest_first(fingerprinter: Fingerprinter) -> None:
    fp = fingerprinter.fingerprint(
        "", "香港 香港 香港 立法会 立法会 政府 economy economy", explain=True
    )
    terms = dict(fp.terms)
    assert list(terms) == [t for t, _ in sorted(fp.terms, key=lambda tw: -tw[1])]
    assert terms.keys() == {"香港", "立法会", "政府", "economy"}
    assert (
        fp.simhash
        == fingerprinter.fingerprint(
            "", "香港 香港 香港 立法会 立法会 政府 economy economy"
        ).simhash
    )


def test_max_terms_keeps_the_heaviest(hkcnews: list[dict]) -> None:
    few = Fingerprinter(FingerprintOptions(max_terms=5))
    fp = few.fingerprint(hkcnews[0]["title"], hkcnews[0]["content"], explain=True)
    everything = Fingerprinter(FingerprintOptions(max_terms=None))
    full = everything.fingerprint(hkcnews[0]["title"], hkcnews[0]["content"], explain=True)
    assert len(fp.terms) == 5
    assert fp.terms == full.terms[:5]


def test_title_weight_counts_title_terms_more() -> None:
    light = Fingerprinter(FingerprintOptions(title_weight=1.0))
    heavy = Fingerprinter(FingerprintOptions(title_weight=3.0))
    title, content = "台风", "台风 香港 香港 香港"
    w_light = dict(light.fingerprint(title, content, explain=True).terms)
    w_heavy = dict(heavy.fingerprint(title, content, explain=True).terms)
    assert w_heavy["台风"] / w_heavy["香港"] == pytest.approx(2 * w_light["台风"] / w_light["香港"])


def test_hamming() -> None:
    assert hamming(0, 0) == 0
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1011, 0b0001) == 2


# --- equal texts, equal fingerprints ------------------------------------------------------


def test_layout_html_case_and_width_do_not_change_anything(fingerprinter: Fingerprinter) -> None:
    plain = fingerprinter.fingerprint("Typhoon Signal", "香港天文台发出八号风球。\n学校停课。")
    html = fingerprinter.fingerprint(
        "<h1>TYPHOON  signal</h1>", "<div><p>香港天文台发出八号风球。</p><p>学校停课。</p></div>"
    )
    assert plain == html


def test_traditional_repost_of_simplified_article_is_identical(
    fingerprinter: Fingerprinter,
) -> None:
    s2t = opencc.OpenCC("s2t").convert
    articles = _articles("zh_cctv_xwlb_2022_2026", 300)
    same = 0
    for a in articles:
        original = fingerprinter.fingerprint(a["title"], a["content"])
        repost = fingerprinter.fingerprint(s2t(a["title"]), s2t(a["content"]))
        same += original == repost
    # OpenCC's round trip is not perfect for a few rare characters; the fingerprints still are.
    assert same / len(articles) >= 0.97


def test_deterministic_across_processes(hkcnews: list[dict], fingerprinter: Fingerprinter) -> None:
    sample = hkcnews[:20]
    script = (
        "import json, sys\n"
        "from consumer.fingerprint.fingerprinter import Fingerprinter\n"
        "fp = Fingerprinter()\n"
        "for a in json.load(sys.stdin):\n"
        "    f = fp.fingerprint(a['title'], a['content'])\n"
        "    print(f.simhash_hex, f.content_hash_hex)\n"
    )
    outputs = []
    for seed in ("1", "2"):  # str hashing differs between these processes
        done = subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(sample),
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            check=True,
        )
        outputs.append(done.stdout.split("\n")[:-1])
    here = [
        f"{f.simhash_hex} {f.content_hash_hex}"
        for f in (fingerprinter.fingerprint(a["title"], a["content"]) for a in sample)
    ]
    assert outputs[0] == outputs[1] == here


def test_reference_and_fast_engines_agree(
    hkcnews: list[dict], fingerprinter: Fingerprinter
) -> None:
    reference = Fingerprinter(FingerprintOptions(engine="jieba"))
    sample = hkcnews[:300]
    same = sum(
        reference.fingerprint(a["title"], a["content"])
        == fingerprinter.fingerprint(a["title"], a["content"])
        for a in sample
    )
    assert same / len(sample) >= 0.999


@pytest.mark.parametrize(
    "options",
    [
        FingerprintOptions(),
        FingerprintOptions(max_terms=5),
        FingerprintOptions(max_terms=None),
        FingerprintOptions(title_weight=2.5),
        FingerprintOptions(convert_traditional=False),
    ],
    ids=["default", "max_terms=5", "all terms", "title_weight=2.5", "no conversion"],
)
def test_batch_equals_article_by_article_on_real_text(options: FingerprintOptions) -> None:
    items = [
        (a["title"], a["content"])
        for name in ("zh_hkcnews_2017_2022", "zh_cctv_xwlb_2022_2026", "en_reuters21578")
        for a in _articles(name, 200)
    ]
    fingerprinter = Fingerprinter(options)
    expected = [fingerprinter.fingerprint(title, content) for title, content in items]
    # Batches of several sizes (the full one spans three internal batches).
    assert fingerprinter.fingerprint_many(items) == expected
    assert fingerprinter.fingerprint_many(items[:1]) == expected[:1]
    assert fingerprinter.fingerprint_many(items[:300]) == expected[:300]


def test_batch_puts_errors_in_place(fingerprinter: Fingerprinter) -> None:
    items = [
        ("香港新聞", "立法會今日三讀通過法案"),
        ("", ""),
        (None, "香港"),
        ("的了", "，。！"),
        ("Rates", "The central bank raised interest rates."),
    ]
    results = fingerprinter.fingerprint_many(items)  # type: ignore[arg-type]
    assert results[0] == fingerprinter.fingerprint(*items[0])
    assert isinstance(results[1], EmptyTextError) and isinstance(results[3], EmptyTextError)
    assert isinstance(results[2], InputError)
    assert results[4] == fingerprinter.fingerprint(*items[4])
    assert fingerprinter.fingerprint_many([]) == []


def test_worker_fingerprints_a_batch_as_message_by_message(hkcnews: list[dict]) -> None:
    worker = _Worker(InputConfig(), fingerprint_options(FingerprintConfig()))
    messages = [json.dumps(a).encode() for a in hkcnews[:40]]
    messages[3:3] = [
        b"not json",
        json.dumps({"id": "stop-words-only", "title": "的了", "content": "，。"}).encode(),
        None,
    ]
    works = [(m, 1_700_000_000_000 + i) for i, m in enumerate(messages)]
    results = worker.analyze_many(works)
    assert results == [worker.analyze(w) for w in works]
    analyzed = [r for r in results if isinstance(r, Analyzed)]
    fingerprints = Fingerprinter().fingerprint_many(
        [(a["title"], a["content"]) for a in hkcnews[:40]]
    )
    assert [(r.sketch, r.bands, r.shingles) for r in analyzed] == [
        (fp.sketch, fp.bands, fp.shingles)
        for fp in fingerprints  # type: ignore[union-attr]
    ]
    assert all(len(r.bands) == 64 and r.shingles for r in analyzed)
    assert [r.reason for r in results[3:6]] == [  # type: ignore[union-attr]
        InvalidReason.NOT_JSON,
        InvalidReason.EMPTY_TEXT,
        InvalidReason.NOT_JSON,
    ]


# --- sensible distances on real news ------------------------------------------------------
# Edits an aggregator or an editor makes; run with -s to print the distributions
# (benchmarks/history/undated.md, "Small edits move few bits").


def _boilerplate(title: str, content: str) -> tuple[str, str]:
    return (
        f"【本报讯】{title}",
        f"【本报讯】记者王小明报道\n{content}\n（本文来源：某某新闻网，转载请注明出处。责任编辑：李四）",
    )


def _punctuation(title: str, content: str) -> tuple[str, str]:
    return title, content.replace("「", "").replace("」", "").replace("。", "！").replace(
        "、", "，"
    )


def _layout(title: str, content: str) -> tuple[str, str]:
    return title, "<div>" + "".join(f"<p>{p}</p>" for p in content.split("\n")) + "</div>"


def _drop_sentence(title: str, content: str) -> tuple[str, str]:
    sentences = content.split("。")
    del sentences[len(sentences) // 2]
    return title, "。".join(sentences)


EDITS = {
    # edit: (largest median distance, largest 90th percentile)
    "layout": (_layout, 0, 0),
    "punctuation": (_punctuation, 0, 3),
    "boilerplate": (_boilerplate, 3, 7),
    "one sentence dropped": (_drop_sentence, 4, 10),
}


def _summary(d: np.ndarray) -> str:
    return (
        f"mean {d.mean():.2f}, median {np.median(d):.0f}, p90 {np.percentile(d, 90):.0f}, "
        f"p99 {np.percentile(d, 99):.0f}, max {d.max()}, ≤3: {np.mean(d <= 3):.1%}"
    )


@pytest.mark.parametrize("edit", list(EDITS))
def test_small_edits_move_few_bits(
    edit: str, hkcnews: list[dict], fingerprinter: Fingerprinter
) -> None:
    change, max_median, max_p90 = EDITS[edit]
    d = np.array(
        [
            hamming(
                fingerprinter.fingerprint(a["title"], a["content"]).simhash,
                fingerprinter.fingerprint(*change(a["title"], a["content"])).simhash,
            )
            for a in hkcnews
        ]
    )
    print(f"\n{edit} ({len(d)} hkcnews articles): {_summary(d)}")
    assert np.median(d) <= max_median
    assert np.percentile(d, 90) <= max_p90


@pytest.mark.parametrize(
    "corpus", ["zh_hkcnews_2017_2022", "zh_cctv_xwlb_2022_2026", "en_reuters21578"]
)
def test_unrelated_articles_sit_near_32_bits_apart(
    corpus: str, fingerprinter: Fingerprinter
) -> None:
    articles = _articles(corpus, 1500, min_chars=200)
    with gzip.open(shared_data_dir() / f"{corpus}.near_dup_pairs.jsonl.gz", "rt") as f:
        related = {frozenset((p["a"], p["b"])) for p in map(json.loads, f)}
    fps = [fingerprinter.fingerprint(a["title"], a["content"]) for a in articles]
    rng = random.Random(20261122)
    d = []
    while len(d) < 3000:
        i, j = rng.randrange(len(articles)), rng.randrange(len(articles))
        unrelated = i != j and frozenset((articles[i]["id"], articles[j]["id"])) not in related
        if unrelated and fps[i].content_hash != fps[j].content_hash:
            d.append(hamming(fps[i].simhash, fps[j].simhash))
    dist = np.array(d)
    print(f"\nunrelated {corpus} (3000 random pairs): {_summary(dist)}, sd {dist.std():.2f}")
    assert 29 <= dist.mean() <= 34
    assert np.mean(dist <= 10) < 0.005


# --- IDF tables ---------------------------------------------------------------------------


def test_bundled_idf_table_lookup_matches_the_file() -> None:
    table = load_idf()
    words, values = [], []
    with bundled_idf_path().open(encoding="utf-8") as f:
        for line in islice(f, 0, None, 5000):
            word, idf = line.split()
            words.append(word)
            values.append(float(idf))
    assert table.lookup(hash_terms(words)).tolist() == values
    unknown = table.lookup(hash_terms(["不存在的词语xyz", "qqqzzz"]))
    assert unknown.tolist() == [table.median, table.median]


def test_user_idf_table(tmp_path: Path) -> None:
    frequencies = DocumentFrequencies()
    for doc in (["香港", "天气"], ["香港", "选举", "选举"], ["香港", "经济"], ["天气"]):
        frequencies.add(doc)
    path = tmp_path / "idf.txt"
    frequencies.write(path)
    lines = dict(line.split() for line in path.read_text(encoding="utf-8").splitlines())
    assert float(lines["香港"]) == pytest.approx(np.log(4 / 3))
    assert float(lines["选举"]) == pytest.approx(np.log(4 / 1))
    fp = Fingerprinter(FingerprintOptions(idf_path=str(path)))
    weights = dict(fp.fingerprint("", "香港 选举 zzyzx", explain=True).terms)
    # Reported weights are tf × idf / 3 terms; unknown words get the table's median IDF.
    assert weights["选举"] == pytest.approx(np.log(4) / 3)
    assert weights["香港"] == pytest.approx(np.log(4 / 3) / 3)
    assert weights["zzyzx"] == pytest.approx(load_idf(str(path)).median / 3)


@pytest.mark.parametrize("text", ["香港 1.0\nbroken line here\n", "香港 nan\n", "", "香港\n"])
def test_malformed_idf_table_is_an_input_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="IDF table"):
        Fingerprinter(FingerprintOptions(idf_path=str(path)))


def test_missing_idf_table_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        Fingerprinter(FingerprintOptions(idf_path=str(tmp_path / "nope.txt")))


# --- hostile input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "   \n\t ", "，。！？……——", "😀🎉👍🏽" * 50, "的了在是", "a b c 1 2 3", "<p></p><br/>"],
)
def test_nothing_to_fingerprint_is_a_typed_error(fingerprinter: Fingerprinter, text: str) -> None:
    with pytest.raises(EmptyTextError, match="nothing to fingerprint"):
        fingerprinter.fingerprint(text, text)


def test_wrong_types_are_input_errors(fingerprinter: Fingerprinter) -> None:
    with pytest.raises(InputError):
        fingerprinter.fingerprint(None, "香港")  # type: ignore[arg-type]


def test_ten_megabytes_take_bounded_time(fingerprinter: Fingerprinter) -> None:
    sentence = "香港特别行政区政府今日公布最新经济数据，Economy grew 3.5% in 2023. "
    huge = sentence * (10_000_000 // len(sentence))
    start = time.process_time()
    fp = fingerprinter.fingerprint("大标题", huge)
    assert time.process_time() - start < 5
    assert fp == fingerprinter.fingerprint("大标题", huge[:100_000])  # max_chars


def test_lone_surrogates_and_binary_junk(fingerprinter: Fingerprinter) -> None:
    junk = bytes(range(256)).decode("utf-8", errors="surrogateescape") * 40
    for text in (
        "香港\ud800新闻\udfff报道",
        junk,
        "\x00" * 1000 + "香港新闻",
        "\ufffe\uffff香港新闻",
    ):
        with contextlib.suppress(EmptyTextError):
            fingerprinter.fingerprint(text, text)


@settings(max_examples=400, deadline=None)
@given(
    title=st.text(max_size=50),
    content=st.one_of(
        st.text(),
        st.text(alphabet=st.characters(categories=["Lo", "Nd", "P", "So", "Zs", "Cc", "Cs"])),
        st.binary().map(lambda b: b.decode("utf-8", errors="surrogateescape")),
        st.lists(
            st.sampled_from(
                [
                    "<p>",
                    "</p>",
                    "<!--",
                    "-->",
                    "<script>",
                    "&amp;",
                    "&#0;",
                    "香港",
                    "新闻",
                    "a",
                    " ",
                ]
            )
        ).map("".join),
    ),
)
def test_any_input_gives_a_fingerprint_or_a_typed_error(
    fingerprinter: Fingerprinter, title: str, content: str
) -> None:
    try:
        fp = fingerprinter.fingerprint(title, content)
    except NewsdedupError:
        return
    assert 0 <= fp.simhash < 2**64 and len(fp.content_hash) == 16
    assert fingerprinter.fingerprint(title, content) == fp
