"""Realistic edits that turn a news article into a near-duplicate repost, one kind at a time.

Every generator is deterministic for a given `random.Random` and records its kind, so recall
can be reported per kind of edit. The edits imitate what feeds really carry: aggregator reposts,
re-rendered HTML, wire corrections, careless copy-editing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from random import Random


class Script(StrEnum):
    """The writing system of an article: edits differ for each (boilerplate, typos, conversion)."""

    TRADITIONAL = "traditional"
    SIMPLIFIED = "simplified"
    LATIN = "latin"


class EditKind(StrEnum):
    BOILERPLATE = "boilerplate"  # repost with source, editor and copyright lines
    HTML = "html"  # the same text re-rendered inside an HTML page layout
    PUNCTUATION = "punctuation"  # full-/half-width, quote styles, dropped commas, spacing
    TRUNCATION = "truncation"  # teaser: the first 60–90 % of the sentences and a "more" line
    DROPPED_SENTENCES = "dropped_sentences"
    SWAPPED_SENTENCES = "swapped_sentences"
    TYPOS = "typos"
    RETITLED = "retitled"  # same story under a new headline
    INSERTED_SENTENCE = "inserted_sentence"  # one unrelated sentence from another article
    SCRIPT_CONVERSION = "script_conversion"  # Traditional ↔ Simplified (OpenCC)
    WIRE_CORRECTION = "wire_correction"  # "CORRECTED - …", a changed figure, a correction note
    MIXED = "mixed"  # two or three of the above, as real reposts usually combine them


@dataclass(frozen=True, slots=True)
class Text:
    title: str
    content: str


@dataclass(frozen=True, slots=True)
class Edit:
    kind: EditKind
    text: Text
    detail: str  # what was done, for reading a missed pair in the report


# --- sentences --------------------------------------------------------------------------------

# Split points keep every character, so "".join(pieces) is the original text.
_CJK_SPLIT = re.compile(r"(?<=[。！？!?\n])(?![」』”’）)\n])")
_LATIN_SPLIT = re.compile(r"(?<=[.!?])(?=\s+[A-Z\"(])")
_HAS_WORD = re.compile(r"[^\W_]")


def split_sentences(content: str, script: Script) -> list[str]:
    """Sentences with their trailing punctuation and surrounding whitespace, in order."""
    splitter = _LATIN_SPLIT if script is Script.LATIN else _CJK_SPLIT
    return [p for p in splitter.split(content) if p]


def _real(pieces: list[str]) -> list[int]:
    """Indices of pieces that hold words (not only blank lines or punctuation)."""
    return [i for i, p in enumerate(pieces) if _HAS_WORD.search(p)]


def detect_script(text: str) -> Script:
    """Latin when most letters are Latin; Traditional when OpenCC `t2s` changes many characters."""
    from consumer.evaluation.truth import is_latin_script

    if is_latin_script(text):
        return Script.LATIN
    sample = text[:2000]
    changed = sum(a != b for a, b in zip(sample, _converter("t2s")(sample), strict=False))
    return Script.TRADITIONAL if changed * 100 >= len(sample) else Script.SIMPLIFIED


@lru_cache(maxsize=2)
def _converter(config: str) -> Callable[[str], str]:
    import opencc

    return opencc.OpenCC(config).convert


# --- the generators ---------------------------------------------------------------------------

# Invented outlet and editor names: boilerplate must look real without naming anyone real.
_SOURCES = {
    Script.TRADITIONAL: ("港聞速遞", "城市日報網", "新聞集合站", "東方觀察"),
    Script.SIMPLIFIED: ("新闻聚合网", "城市晚报客户端", "要闻速览", "东方观察"),
    Script.LATIN: ("Wire Digest", "NewsNow Aggregator", "Market Daily", "City Herald"),
}
_EDITORS = {
    Script.TRADITIONAL: ("陳志明", "李嘉欣", "黃偉強", "張美玲"),
    Script.SIMPLIFIED: ("王建国", "刘晓燕", "赵伟", "陈静"),
    Script.LATIN: ("John Moore", "Anna Keller", "Peter Hsu", "Maria Lopez"),
}


def _boilerplate(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    source, editor = rng.choice(_SOURCES[script]), rng.choice(_EDITORS[script])
    if script is Script.LATIN:
        head = f"({source}) - "
        tail = (
            f"\n (Reporting by {editor}; Editing by {rng.choice(_EDITORS[script])})"
            f"\n Copyright {source}. All rights reserved."
        )
    elif script is Script.TRADITIONAL:
        head = f"【{source}訊】原標題：{text.title}\n"
        tail = f"\n（本文轉載自{source}，版權歸原作者所有。責任編輯：{editor}）"
    else:
        head = f"来源：{source}\n"
        tail = f"\n（责任编辑：{editor}）\n本文为转载，如有侵权请联系删除。"
    return Text(text.title, head + text.content + tail), f"source {source}, editor {editor}"


def _html(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    paragraphs = [p.strip() for p in text.content.split("\n") if p.strip()]
    if script is Script.LATIN:
        # Reuters wraps lines inside paragraphs; an HTML page reflows them with <br>.
        paragraphs = [p.replace("&", "&amp;").replace('"', "&quot;") for p in paragraphs]
    body = "\n".join(
        f'<p class="{rng.choice(("txt", "para", "content-p"))}">{p}</p>' for p in paragraphs
    )
    page = (
        '<div class="article-body" data-layout="v2">\n'
        f"<h1>{text.title}</h1>\n"
        "<script>window.dataLayer=window.dataLayer||[];dataLayer.push({page:'article'});</script>\n"
        f"{body}\n"
        "<style>.article-body p{line-height:1.8}</style>\n</div>"
    )
    return Text(text.title, page), f"{len(paragraphs)} <p> paragraphs"


_CJK_PUNCT = {
    "，": ",",
    "。": ".",
    "：": ":",
    "；": ";",
    "！": "!",
    "？": "?",
    "「": "“",
    "」": "”",
}
_LATIN_PUNCT = {'"': "''", ",": " ,", "--": " - ", ";": ",", "-": " - "}


def _punctuation(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    table = _LATIN_PUNCT if script is Script.LATIN else _CJK_PUNCT
    present = [mark for mark in sorted(table) if mark in text.content]
    chosen = rng.sample(present, k=min(3, len(present)))
    content = text.content
    for mark in chosen:
        content = content.replace(mark, table[mark])
    content = re.sub(r"[ \t]*\n[ \t]*", "\n", content)  # re-flowed indentation
    return Text(text.title, content), "replaced " + " ".join(chosen)


def _truncation(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    # A teaser keeps 60–90 % of the text, cut at the sentence end reaching that much, or
    # mid-sentence when one long sentence holds it (feeds cut at a character budget too).
    target = round(len(text.content) * rng.uniform(0.6, 0.9))
    kept = ""
    for piece in split_sentences(text.content, script):
        kept += piece
        if len(kept) >= target:
            break
    if len(kept) >= len(text.content):
        kept = text.content[:target]
    more = {Script.LATIN: "\n MORE", Script.TRADITIONAL: "……（未完）", Script.SIMPLIFIED: "……"}
    return (
        Text(text.title, kept.rstrip() + more[script]),
        f"kept {len(kept)} of {len(text.content)} characters",
    )


def _dropped(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    pieces = split_sentences(text.content, script)
    real = _real(pieces)
    n = max(1, min(3, len(real) // 8))
    dropped = set(rng.sample(real, k=n)) if len(real) > n else set()
    content = "".join(p for i, p in enumerate(pieces) if i not in dropped)
    return Text(text.title, content), f"dropped sentences {sorted(dropped)}"


def _swapped(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    pieces = split_sentences(text.content, script)
    real = _real(pieces)
    swaps = []
    # Distinct adjacent transpositions never undo each other, so the text always changes.
    for k in rng.sample(range(len(real) - 1), k=min(2, len(real) - 1)) if real else ():
        i, j = real[k], real[k + 1]
        pieces[i], pieces[j] = pieces[j], pieces[i]
        swaps.append((i, j))
    return Text(text.title, "".join(pieces)), f"swapped {swaps}"


def _typos(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    chars = list(text.content)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    if not letters:
        return text, "no letters"
    # Positions are counted in the text as it was: the typos go from the end backwards, so
    # the part before each is unchanged, but a letter to substitute with may lie past it.
    original = text.content
    per = 250 if script is Script.LATIN else 150  # one typo per this many letters
    n = max(1, len(letters) // per)
    done = []
    for i in sorted(rng.sample(letters, k=min(n, len(letters))), reverse=True):
        op = rng.choice(("substitute", "delete", "double", "transpose"))
        if op == "substitute":
            # A character from the same article is a plausible wrong key or wrong homophone.
            other = original[rng.choice(letters)]
            chars[i] = other if other != chars[i] else "x" if script is Script.LATIN else "的"
        elif op == "delete":
            del chars[i]
        elif op == "double":
            chars.insert(i, chars[i])
        elif i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        done.append(op)
    return Text(text.title, "".join(chars)), f"{len(done)} typos"


_TITLE_PREFIX = {
    Script.TRADITIONAL: ("【更新】", "快訊：", "獨家｜", "全文："),
    Script.SIMPLIFIED: ("【最新】", "快讯：", "关注｜", "重磅！"),
    Script.LATIN: ("UPDATE 1-", "REFILE-", "WRAPUP-", "FOCUS-"),
}


def _retitled(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    pieces = split_sentences(text.content, script)
    real = _real(pieces)
    # A new headline: an agency prefix and the lead sentence's first clause instead of the title.
    lead = pieces[real[0]].strip() if real else text.title
    clause = re.split(r"[，,；;:：]", lead)[0][: 60 if script is Script.LATIN else 24]
    title = rng.choice(_TITLE_PREFIX[script]) + clause.strip(" 。.")
    if script is Script.LATIN:
        title = title.upper()
    return Text(title, text.content), f"title {title!r}"


def _inserted(text: Text, script: Script, rng: Random, donor: Text) -> tuple[Text, str]:
    donor_pieces = split_sentences(donor.content, script)
    donor_real = _real(donor_pieces)
    if not donor_real:
        return text, "donor has no sentence"
    sentence = donor_pieces[rng.choice(donor_real)].strip()
    sentence = (" " if script is Script.LATIN else "") + sentence
    pieces = split_sentences(text.content, script)
    at = rng.randrange(1, len(pieces) + 1)
    pieces.insert(at, sentence)
    return Text(text.title, "".join(pieces)), f"inserted {len(sentence)} chars at {at}"


def _script_conversion(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    config = "t2s" if script is Script.TRADITIONAL else "s2t"
    convert = _converter(config)
    return Text(convert(text.title), convert(text.content)), config


_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def _wire_correction(text: Text, script: Script, rng: Random) -> tuple[Text, str]:
    pieces = split_sentences(text.content, script)
    numbered = [i for i, p in enumerate(pieces) if _NUMBER.search(p)]
    if numbered:
        i = rng.choice(numbered)
        old = rng.choice(_NUMBER.findall(pieces[i]))
        new = str(int(float(old)) + rng.randint(1, 9)) if "." not in old else f"{old}5"
        pieces[i] = pieces[i].replace(old, new, 1)
        note = f"(Corrects figure in paragraph {i + 1} to {new} from {old})"
    else:
        note = "(Corrects spelling of company name in first paragraph)"
    return Text(f"CORRECTED - {text.title}", note + "\n" + "".join(pieces)), note


_SIMPLE: dict[EditKind, Callable[[Text, Script, Random], tuple[Text, str]]] = {
    EditKind.BOILERPLATE: _boilerplate,
    EditKind.HTML: _html,
    EditKind.PUNCTUATION: _punctuation,
    EditKind.TRUNCATION: _truncation,
    EditKind.DROPPED_SENTENCES: _dropped,
    EditKind.SWAPPED_SENTENCES: _swapped,
    EditKind.TYPOS: _typos,
    EditKind.RETITLED: _retitled,
    EditKind.SCRIPT_CONVERSION: _script_conversion,
    EditKind.WIRE_CORRECTION: _wire_correction,
}


def applicable_kinds(script: Script) -> tuple[EditKind, ...]:
    """Kinds that make sense for an article in `script`, in a fixed order."""
    skip = {EditKind.SCRIPT_CONVERSION} if script is Script.LATIN else {EditKind.WIRE_CORRECTION}
    return tuple(k for k in EditKind if k not in skip)


def apply_edit(kind: EditKind, text: Text, script: Script, rng: Random, donor: Text) -> Edit:
    """`text` edited by `kind`; `donor` is the unrelated article an inserted sentence comes from."""
    if kind is EditKind.INSERTED_SENTENCE:
        edited, detail = _inserted(text, script, rng, donor)
    elif kind is EditKind.MIXED:
        # The HTML page goes last: the other edits work on plain sentences.
        singles = [k for k in applicable_kinds(script) if k not in (EditKind.MIXED, EditKind.HTML)]
        parts = rng.sample(singles, k=rng.randint(2, 3))
        if rng.random() < 0.3:
            parts.append(EditKind.HTML)
        edited, details = text, []
        for part in parts:
            step = apply_edit(part, edited, script, rng, donor)
            edited = step.text
            details.append(f"{part}: {step.detail}")
        detail = "; ".join(details)
    else:
        edited, detail = _SIMPLE[kind](text, script, rng)
    return Edit(kind, edited, detail)
