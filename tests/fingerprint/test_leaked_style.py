"""Style rules that leaked into scraped text are dropped; prose with braces is not."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.fingerprint.leaked_style import (
    _DATA_URI,
    _EMPTY_AT_RULE,
    _OPENS_DECLARATION,
    _RULES,
    strip_leaked_style,
)
from consumer.fingerprint.normalize import Normalizer

TEMPLATE_CSS = (
    ".art-hd{padding:20px 20px 0px;background:url(//img.portal.example/hd.png) no-repeat 0 0 "
    "#f4f4f4;}.art-hd h1{font-size:26px;line-height:36px;color:#222;}"
    "ul.share li a:hover,#nav .cur{color:#c00 !important;text-decoration:underline}"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TEMPLATE_CSS + "正文开始", " 正文开始"),
        ("导语" + TEMPLATE_CSS + "正文", "导语 正文"),
        ("@media screen and (max-width:600px){.a{width:100%}.b p{margin:0}} 新闻", "  新闻"),
        (
            "@font-face{font-family:iconfont;src:url('//cdn.example/f.woff') format('woff')}正文",
            " 正文",
        ),
        ("body{margin:0}\ndiv.main > p + p{text-indent:2em}\nThe story.", " The story."),
    ],
)
def test_style_rules_go(text: str, expected: str) -> None:
    assert strip_leaked_style(text) == expected


# What portals' sheets hold beside plain rules, each of which once stopped the scan and left
# its rule, or all of a data URI's kilobytes, in the text.
@pytest.mark.parametrize(
    "sheet",
    [
        "@keyframes spin{0%{transform:rotate(0)}62.5%{opacity:.5}100%{transform:rotate(1turn)}}",
        "@-webkit-keyframes fade{from{opacity:0}to{opacity:1}}",
        "/* header */.hd{padding:0}/*! v1.2 | MIT */.nav{margin:0 /* inline */;color:#333}",
        "[data-v-1a2b]{color:red}.a[data-v-1a2b]{margin:0}",
        ":root{--main-color:#fff;--gap:8px}.a{color:var(--main-color)}",
        ".logo{background:url(data:image/png;base64,iVBORw0KGgo"
        + "A" * 3000
        + "==) no-repeat;width:20px}",
        ".f{src:url('data:font/woff2;charset=utf-8;base64,d09GMgABAAAAA') format('woff2')}",
        ".clearfix{*zoom:1;_height:1px}.clearfix:after{content:'.';display:block;clear:both}",
        '@charset "utf-8";@import url(//s.portal.example/a.css);.a{color:red}',
        ".icon svg path{fill:#333}iframe{border:0}",
        ".a{\r\n  color: red;\r\n}\r\n.b{margin:0}",
        # Lines ended by "\r\n": the shell of an @media block once stayed.
        "@media screen and (max-width:600px){\r\n.a{width:100%}\r\n}\r\n",
        # Its only block opening with a comment: the scan once never started.
        ":root,\n.light {\n  /* 主题色 */\n  --color-primary: #16baaa;\n}\n",
    ],
)
def test_every_part_of_a_portal_sheet_goes(sheet: str) -> None:
    story = "香港特区政府今日公布最新经济数据，第三季度本地生产总值按年实质增长百分之二点九。"
    assert strip_leaked_style(sheet + story).strip() == story
    # (Each run goes as one space; white space is folded after the scan.)
    assert "".join(strip_leaked_style("导语" + sheet + story).split()) == "导语" + story


@pytest.mark.parametrize(
    "prose",
    [
        "He said {the deal} was off: prices {rose: 3%}.",
        'The JSON {"a": 1} stays, and so does f(x) = {x: x > 0}.',
        "Sets like {1, 2, 3} and maps like {key: value} are not style rules.",
        "记者{张三}报道：今日{天气：晴}",
        "If x {y:z} then",
        "Growth was 5% in March {note: revised} and 62.5% of it {came: from exports}.",
        "A list [1] {see: below} and a time 12:30 {local: yes}.",
        "Comments /* like this */ {stay: put} in prose.",
        # Found in review: an animation's "from", "to" and percentages, a pseudo-class or an
        # attribute test standing alone, each once taken for a selector.
        "The update changed the default from {enabled: true} to {enabled: false}, it said.",
        "The set of solutions maps to {x: x > 0} under the new rule.",
        "支持率為62.5% {source: 港大民研}，較上月上升。",
        "Growth was 5% {revised: from 4%} in March.",
        "[Editor's note] {update: see below}",
        "記者:Tom {photo: AP}",
        "He wrote :D {hug: you}",
    ],
)
def test_prose_with_braces_stays(prose: str) -> None:
    assert strip_leaked_style(prose) == prose


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda t: "{" not in t))
def test_text_without_a_brace_is_never_touched(text: str) -> None:
    assert strip_leaked_style(text) is text


# Pieces of style sheets, markup names, prose and their separators, glued at random: the
# rules' scan tries a match only where one can start, and must take out what trying at every
# character does.
_PIECES = st.sampled_from(
    [
        ".art-hd",
        "#nav",
        " .cur",
        "ul",
        " li",
        " a",
        ":hover",
        "::before",
        "[href^='x']",
        "h1",
        "H2",
        "div.main",
        " > ",
        " + ",
        ",",
        "@media screen",
        "@font-face",
        "*",
        "x-div",
        "_p",
        "-a",
        "3p",
        "{",
        "}",
        "{color:#c00;",
        "padding:0 1px",
        ";",
        "}",
        " ",
        "\n",
        "正文",
        "记者报道",
        "The story",
        " a b i ",
        "é",
        "pé{color:red}",
        "p{margin:0}",
        "table td{border:0}",
        "@media (x){.a{b:c}}",
        ".",
        "/* c */",
        "/*",
        "*/",
        "[data-x]",
        ":root",
        "0%",
        "62.5%",
        "5",
        "from",
        "to",
        "svg",
        "{*zoom:1",
        "--v:1",
        "_height:2px",
        "url(data:a;b)",
        "@import x;",
        "@charset 'u';",
        "\r\n",
    ]
)


def _every_character(text: str) -> str:
    if "{" not in text or _OPENS_DECLARATION.search(text) is None:
        return text
    if "data:" in text:
        text = _DATA_URI.sub("url()", text)
    text = _RULES.sub(" ", text)
    return _EMPTY_AT_RULE.sub(" ", text) if "@" in text else text


@settings(max_examples=2000, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_rules_are_found_where_trying_every_character_finds_them(text: str) -> None:
    assert strip_leaked_style(text) == _every_character(text)


def test_a_chinese_article_behind_a_style_block_normalizes_as_without_it() -> None:
    normalize = Normalizer()
    story = "香港特区政府今日公布最新经济数据，第三季度本地生产总值按年实质增长百分之二点九。"
    assert normalize(TEMPLATE_CSS + story) == normalize(story)


@pytest.mark.parametrize(
    "hostile",
    [
        "a{" * 50_000,
        ".x " * 40_000 + "{",
        "p{color:" * 30_000,
        ".a:b(" * 30_000 + "{}",
        "@media " * 30_000 + "{",
        ".a{b:c;" * 20_000,
        # Found in review: one declaration anywhere, then long runs of selector-like text.
        "{color:red} " + ".a" * 32_000,
        "{color:red} " + "#x" * 32_000,
        "{color:red} " + "p:a" * 20_000,
        "{color:red} " + "/*" * 30_000,
        "{color:red} " + "/* " + "x" * 60_000,
        "{color:red} " + "[a]" * 20_000,
        "{color:red} " + ":a" * 30_000,
        "{color:red} " + "1%" * 30_000,
        "{color:red} " + "url(data:" * 10_000,
        "{color:red} " + "@import " * 10_000,
        # Found in review: each start of a run of comments read it to its end.
        "p{color:red}x" + "/**/" * 25_000,
        "{a:b}x" + "/* */" * 20_000,
        "{a:b}x" + "/*x*/\n" * 16_000,
    ],
)
def test_hostile_text_is_linear(hostile: str) -> None:
    start = time.process_time()
    strip_leaked_style(hostile)
    assert time.process_time() - start < 2.0


def test_a_data_uri_cut_short_never_takes_the_story_after_it() -> None:
    # Found in review: the URI's characters once ran on over the story to its first ")".
    story = "政府公布紓困措施，措施包括：1) 減稅 2) 派錢。" * 20
    text = ".logo{color:red} background:url(data:image/png;base64,iVBORw0KGgo" + story
    assert strip_leaked_style(text).endswith(story)
