"""Script code that leaked into scraped text is dropped; prose that looks a little like code
is not, and no article of the real corpora loses a character."""

from __future__ import annotations

import gzip
import json
import time
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from page_templates import LEAKED_SCRIPT

from consumer.corpus import shared_data_dir
from consumer.fingerprint.leaked_script import strip_leaked_script
from consumer.fingerprint.normalize import Normalizer, strip_html

STORY = "香港特区政府今日公布最新经济数据，第三季度本地生产总值按年实质增长百分之二点九。"

SNIPPETS = [
    # A statistics loader.
    "var _stq = _stq || []; (function() { var s = document.createElement('script'); "
    "s.src = '//stat.site.example/s.js'; document.head.appendChild(s); })();",
    # A share widget's settings, then its loader.
    'window._share_config = {"common": {"size": "16", "style": "0"}, "share": {}}; '
    "with (document) 0[(getElementsByTagName('head')[0] || body).appendChild(createElement("
    "'script')).src = '//share.site.example/api/js/share.js?v=' + ~(-new Date() / 36e5)];",
    # Structured data.
    '{"@context": "https://schema.org", "@type": "NewsArticle", "headline": "", '
    '"datePublished": "2024-03-15T08:00:00+08:00", "author": {"@type": "Person"}}',
    # jQuery, arrow functions, a minified guard.
    "$(function () { $('.tab li').on('click', () => { $(this).addClass('on'); }); });",
    # jQuery by its name, and no other mark a substring test looks for.
    "jQuery('.nav a').click(jQuery.proxy(menu.open, menu)); jQuery('#top').hide(300);",
    "!function(e,t){var n=t.createElement('script');n.async=!0;n.src=e;t.body.appendChild(n)}"
    "('//ads.site.example/a.js',document);",
    "if (window.innerWidth < 768) { document.body.className += ' mobile'; }",
]


@pytest.mark.parametrize("code", SNIPPETS)
def test_script_code_goes_from_chinese_text(code: str) -> None:
    assert strip_leaked_script(code + STORY).strip() == STORY
    assert strip_leaked_script(STORY + code).strip() == STORY
    assert strip_leaked_script(STORY + code + STORY).split() == [STORY, STORY]


@pytest.mark.parametrize("code", SNIPPETS)
def test_script_code_on_its_own_line_goes_from_english_text(code: str) -> None:
    before, after = "Oil prices rose on Monday.", "Traders expect more supply."
    assert strip_leaked_script(f"{before}\n{code}\n{after}").split() == [
        *before.split(),
        *after.split(),
    ]


# The analytics loader of a great many Chinese portals, as their pages' source lays it out: a
# statement a line, no line of it long enough to be code on its own.
LAID_OUT = """var _hmt = _hmt || [];
(function() {
  var hm = document.createElement("script");
  hm.src = "https://hm.stats.example/hm.js?8a7d2c4e5f6b1a3d9e0c7b2a4f6d8e1c";
  var s = document.getElementsByTagName("script")[0];\t
  s.parentNode.insertBefore(hm, s);
})();"""


def test_a_snippet_laid_out_a_statement_a_line_goes() -> None:
    assert strip_leaked_script(LAID_OUT + "\n" + STORY).strip() == STORY
    assert strip_leaked_script(STORY + "\n" + LAID_OUT + "\n" + STORY).split() == [STORY, STORY]
    crlf = LAID_OUT.replace("\n", "\r\n")
    assert strip_leaked_script(f"{STORY}\r\n{crlf}\r\n{STORY}").split() == [STORY, STORY]
    before, after = "Oil prices rose on Monday.", "Traders expect more supply."
    assert strip_leaked_script(f"{before}\n{LAID_OUT}\n{after}").split() == [
        *before.split(),
        *after.split(),
    ]


def test_a_byline_or_a_clause_between_two_laid_out_snippets_stays_and_both_go() -> None:
    # Found in review: with a line ending in a comma taken into the run, the span of the first
    # snippet ran over the line after it, and the second snippet was never looked for.
    first = "(function(){var s=document.createElement('script');s.src='x.js';})();"
    second = "window.dataLayer = window.dataLayer || [];dataLayer.push({'event':'pageview'});"
    for between in ("By John Smith and Mary Lee,", "The minister said talks would resume,"):
        page = f"{first}\n{between}\n{second}\nThe talks resume next week."
        assert strip_leaked_script(page).split() == [
            *between.split(),
            *["The", "talks", "resume", "next", "week."],
        ]


def test_quoted_lines_that_end_in_a_semicolon_after_a_mark_in_prose_stay() -> None:
    prose = (
        "He stared out of the window.Then (after a pause) he spoke,\n"
        '"I can\'t" (he said);\n"I won\'t" (she said);\nand the room fell silent for a while.'
    )
    assert strip_leaked_script(prose) == prose


def test_lines_of_prose_that_end_in_a_comma_or_a_semicolon_stay() -> None:
    prose = (
        "The minister said the plan, which var = nothing in law,\n"
        "would cost (in the first year) about $4 billion;\n"
        "critics (three of them) said the window.It was a guess;\n"
        "the vote is due on Friday."
    )
    assert strip_leaked_script(prose) == prose


def test_a_snippet_before_the_prose_of_a_page_goes_and_the_prose_stays() -> None:
    # The page's paragraphs and the snippet in one run (block tags become spaces): the code
    # ends where six plain words in a row begin.
    prose = (
        "The Senate voted on the bill on Tuesday, and the governor (who is expected to sign "
        "it) said nothing."
    )
    page = strip_html(f"<p>{SNIPPETS[1]}</p><p>{prose}</p>")
    assert strip_leaked_script(page).split() == prose.split()
    page = strip_html(f"<p>{SNIPPETS[0]}</p><p>{prose} {prose} {prose}</p>")
    assert strip_leaked_script(page).split() == (f"{prose} {prose} {prose}").split()


def test_a_portal_page_of_scripts_leaves_nothing() -> None:
    assert strip_leaked_script(LEAKED_SCRIPT).strip() == ""


@pytest.mark.parametrize(
    "prose",
    [
        "The price is a function (in part) of supply; demand matters less.",
        "Let alone the cost: var x = 3 is not what the minister said (he said four).",
        "The window.It was open; the document.It was signed; both were reported.",
        "Shares fell to US$(adjusted) 4.50 => a loss; analysts (three of them) agreed.",
        "He typed function(x) { return x; } into the chat and laughed about it for a while.",
        "记者在window.example网站看到，var是一个英文缩写；function(功能)一词常见。",
        # Found in review: a page of paragraphs is one run once its tags are gone, and the
        # last `;` or `)` of it lay far into the prose.
        'He stared out the window.She said: "It\'s over; we are done (for now)," and left the '
        "room without another word.",
        "Acme Corp. said net loss narrowed to $(1.2) million ($(0.04) per share); revenue rose "
        "3% to $20 million (see table).",
        'The JSON {"@context": 1} in a sentence is one thing, prose around it quite another, '
        "and this sentence goes on long enough to outweigh the braces in it by far.",
    ],
)
def test_prose_that_looks_a_little_like_code_stays(prose: str) -> None:
    assert strip_leaked_script(prose) == prose


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda t: "function" not in t and "=>" not in t and "." not in t))
def test_text_without_a_mark_of_script_is_never_touched(text: str) -> None:
    if "var " in text or "let " in text or "const " in text or "$(" in text:
        return
    assert strip_leaked_script(text) is text


def test_a_chinese_article_behind_a_portals_scripts_normalizes_as_without_them() -> None:
    normalize = Normalizer()
    assert normalize(LEAKED_SCRIPT + STORY) == normalize(STORY)
    assert normalize(STORY + "\n" + LEAKED_SCRIPT) == normalize(STORY)


@pytest.mark.parametrize(
    "corpus", ["zh_hkcnews_2017_2022", "zh_cctv_xwlb_2022_2026", "en_reuters21578"]
)
def test_no_real_article_loses_a_character(corpus: str) -> None:
    path = shared_data_dir() / f"{corpus}.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in islice(f, 20_000):
            article = json.loads(line)
            for text in (article.get("title") or "", article.get("content") or ""):
                text = strip_html(text)
                assert strip_leaked_script(text) is text, text[:200]


@pytest.mark.parametrize(
    "hostile",
    [
        "(" * 100_000 + "function(",
        "var a=" * 30_000,
        "function(" * 30_000,
        "document.a;" * 20_000,
        "if " * 40_000 + "window.x;",
        "=>" * 50_000 + ";",
        ("$(" + "x" * 50) * 2_000,
        ";\n" * 50_000 + "function(",
        ("var a = 1;" + " " * 30 + "\n") * 5_000,
    ],
)
def test_hostile_text_is_linear(hostile: str) -> None:
    start = time.process_time()
    strip_leaked_script(hostile)
    assert time.process_time() - start < 2.0
