"""Script code that leaked into scraped text: dropped before anything is fingerprinted.

Beside its stylesheet (`leaked_style`), a scraped page often keeps the code of its inline
`<script>` elements as text: the analytics snippet every page of a portal carries
(`var _hmt = _hmt || []; (function() { var hm = document.createElement("script"); …})();`),
a share widget's configuration (`window._bd_share_config = {…}`), a JSON-LD block
(`{"@context": "https://schema.org", …}`). Like leaked CSS it is the same on every page of a
site, so it makes unrelated stories look alike, and it is plainly not prose.

What counts as code is kept narrow, so that prose is never taken for it. Code is looked for in
runs of ASCII text (`_RUN`): in Chinese text that isolates it from the story around it, and in
Latin-script text a run is a line, or the lines of a snippet laid out a statement a line.
Within a run, a span from the first mark of script (`_MARK`: a `function (…) {`, a `var x =`,
a `document.` or `window.` member in use, an arrow, a jQuery call, a JSON-LD context) to its
last `;`, `}` or `)` before prose resumes (`_PROSE`: six plain words in a row) is code when it
is at least `MIN_CODE_CHARS` long, holds a `;` or a `{`, and at least `MIN_SYMBOL_SHARE` of its
characters are the brackets, semicolons and operators code is full of and prose uses sparingly
(an English news paragraph: about 1 %; an analytics snippet: about 20 %). Only text with a mark is
scanned at all.
"""

from __future__ import annotations

import re

MIN_CODE_CHARS = 40
MIN_SYMBOL_SHARE = 0.1
# Scanned for runs only when one of these is in the text: a substring test costs next to
# nothing, and nearly no article has any of them.
_CHEAP_MARKS = (
    "function",
    "var ",
    "let ",
    "const ",
    "document.",
    "window.",
    "=>",
    "$(",
    "jQuery(",
    "@context",
)
_MARK = re.compile(
    # a function with its parameters and body: `function (e, t) {`, `function init() {`
    r"\bfunction\s*+[\w$]{0,64}+\s*+\([^(){}]{0,200}+\)\s*+\{"
    r"|\b(?:var|let|const)\s++[A-Za-z_$][\w$]{0,64}+\s*+="
    # a member of the page's objects used: `document.createElement(`, `window.x =`
    r"|\b(?:document|window)\.[A-Za-z_$][\w$]{0,64}+\s*+[.(=\[<>!+\-*/&|?;)]"
    r"|[\w$)]\s*+=>"
    # jQuery on a function, the page or a selector: `$(function`, `$(document)`, `$('.tab')`
    r"|(?<![\w$])(?:\$|jQuery)\(\s*+(?:function\b|document\b|window\b|this\b|['\"])"
    r'|"@context"',
    re.ASCII,
)
# Prose again: six words in a row, each of two letters or more (an apostrophe or a bracket
# around it, a comma or a stop after it; no double quote, which JSON puts around every name),
# one space apart. Code has that only inside a string or a comment, where it ends the span
# too: less is dropped, never prose.
_PROSE = re.compile(r"(?:['(]?+[A-Za-z][A-Za-z']{1,30}+[,.;:!?')]{0,3}+ ){6}", re.ASCII)
# A run of printable ASCII, long enough to hold code worth dropping: on one line, or on several
# where each line but the last ends as a statement or a block does (`;`, `{`, `}`): a snippet
# as a page's source lays it out, a statement a line, each line too short to be code on its
# own. Prose rarely ends a line so; a line that ends in a comma (a byline, a clause) ends the
# run, so that what follows a snippet's lines is never taken into its span.
_RUN = re.compile(rf"(?:[;{{}}][\t ]*+\r?\n|[\x20-\x7e\t]){{{MIN_CODE_CHARS},}}+")
# What may precede a snippet's first mark: brackets, negation, and the keywords a statement
# opens with, right before it.
_OPENING_CHARS = frozenset("({[!;\"' ")
_OPENING_KEYWORDS = ("if", "else", "try", "return", "new", "typeof", "void", "do", "while", "for")
_SYMBOLS = frozenset("{}()[];=<>+|&!\"'")


def strip_leaked_script(text: str) -> str:
    """`text` without the script code in it (each span of code becomes one space)."""
    # Code worth dropping holds a `;` or a `{` (`_code_span`): most texts have neither, and
    # two substring tests settle them.
    if ";" not in text and "{" not in text:
        return text
    if not any(mark in text for mark in _CHEAP_MARKS):
        return text
    pieces: list[str] = []
    kept = 0
    for run in _RUN.finditer(text):
        span = _code_span(run.group())
        if span is None:
            continue
        start, end = run.start() + span[0], run.start() + span[1]
        pieces += [text[kept:start], " "]
        kept = end
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def _code_span(run: str) -> tuple[int, int] | None:
    """Where in this run of ASCII text its script code lies, if it has any."""
    mark = _MARK.search(run)
    if mark is None:
        return None
    # A snippet opens with what precedes its first mark: `(function`, `!function`,
    # `{"@context"`, `if (window.`.
    start = mark.start()
    while start > 0:
        if run[start - 1] in _OPENING_CHARS:
            start -= 1
            continue
        keyword = next((k for k in _OPENING_KEYWORDS if run.endswith(k, 0, start)), None)
        before = start - len(keyword) - 1 if keyword else -1
        if keyword is None or (before >= 0 and (run[before].isalnum() or run[before] in "_$")):
            break
        start -= len(keyword)
    # To the last `;`, `}` or `)` before prose resumes.
    prose = _PROSE.search(run, mark.end())
    limit = len(run) if prose is None else prose.start()
    end = max(
        run.rfind(";", start, limit), run.rfind("}", start, limit), run.rfind(")", start, limit)
    )
    end += 1
    if end <= start:
        return None
    code = run[start:end]
    if len(code) < MIN_CODE_CHARS or (";" not in code and "{" not in code):
        return None
    symbols = sum(1 for c in code if c in _SYMBOLS)
    if symbols < MIN_SYMBOL_SHARE * len(code):
        return None
    return start, end
