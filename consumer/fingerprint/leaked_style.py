"""Style rules that leaked into scraped text: dropped before anything is fingerprinted.

A scraper that takes a page's text without its markup keeps what a browser would never show:
the bodies of `<style>` elements written inline, or CSS copied along with a template. Hundreds
of characters of `.hd{padding:20px 20px 0px;background:url(//…) no-repeat 0 0 #f4f4f4}`
before each story of one site make its unrelated stories look alike, and in a Chinese story
they outnumber its Chinese letters, which turns its shingling to words. CSS is plainly not
prose, so it goes, as `<style>` bodies already do when the markup is still there.

What counts as a rule is kept narrow, so that prose is never taken for one: a selector made
only of class, id, at-rule, universal, attribute or HTML element names, and the pseudo-classes
sheets use alone (`.art-hd h1`, `#top`, `@font-face`, `ul li a:hover`, `[data-v-3f]`, `:root`),
or an animation's keyframes (`from`, `62.5%`, only inside `@keyframes`), then a brace holding
only `property: value;` declarations (with a hack's `*zoom:1` or a custom `--gap:8px`). What a
real sheet holds around its rules goes with them: comments, `@import` and `@charset`
statements, and an at-rule's shell (`@media screen and (…) {` … `}`) once the rules inside it
are gone. An image inlined as a data URI is emptied first: its base64 holds ";" and runs to
kilobytes. A run of rules goes at once. Only text with a brace opening a declaration
(`{color:`) is scanned for rules: a scan costs ~0.3 ms on a long article, and a quarter of
hkcnews's articles begin with an empty placeholder, "{{}}".
"""

from __future__ import annotations

import re

from consumer.fingerprint.html_names import HTML_ELEMENTS

# Every repetition is bounded: a scan starts at each position, so an unbounded one would make
# a long run of ".a.a.a" after one "{color:" cost the square of its length.
_NAME = r"[a-z0-9_-]{1,64}+"
# Names a selector may hold besides the HTML elements': the elements of inline SVG and frames.
_SELECTOR_WORDS = "iframe|svg|path"
# An attribute test names an attribute (`[data-v-3f]`, `[type=checkbox]`, `[href^='http']`):
# a footnote's "[1]" or an "[Editor's note]" is none.
_ATTRIBUTE = r"\[[ \t]*+[a-z_-][a-z0-9_:-]{0,64}+[ \t]*+(?:[~|^$*]?=[^\[\]{}]{0,80}+)?\]"
_PSEUDO = r"::?[a-z-][a-z0-9_-]{0,63}+(?:\([^(){}]{0,40}\))?"
# A selector that is a pseudo-class alone: only those sheets write so (`:root`, `::selection`,
# `::-webkit-scrollbar`), not a reporter's ":Tom" or a ":D".
_PSEUDO_ALONE = (
    r"::?(?:root|selection|placeholder|-(?:webkit|moz|ms|o)-[a-z-]{1,40}+"
    r"|(?:is|where|not|has)\([^(){}]{0,40}\))"
)
# One simple selector: a class, id or at-rule name, "*", an attribute test, a pseudo-class
# sheets use alone, or an HTML element name standing as a whole word, with any classes, ids,
# pseudo-classes and attribute tests glued to it.
_SIMPLE = (
    rf"(?:[.#]{_NAME}|@{_NAME}|\*|{_ATTRIBUTE}|{_PSEUDO_ALONE}"
    rf"|(?<![a-z0-9_-])(?:{HTML_ELEMENTS}|{_SELECTOR_WORDS})(?![a-z0-9_-]))"
    rf"(?:[.#]{_NAME}|{_PSEUDO}|{_ATTRIBUTE}){{0,8}}+"
)
_SELECTOR = rf"{_SIMPLE}(?:[ \t]*+[,>+~]?[ \t\r\n]*+{_SIMPLE}){{0,15}}+"
# White space, and comments: a minified sheet keeps its licence's (`/*! v1.2 | MIT */`). A few
# of them at a time: each start of a long run of comments would read it to its end.
_COMMENT = r"/\*(?:(?!\*/)[\s\S]){0,300}+\*/"
_GAP = rf"(?:[ \t\r\n]++|{_COMMENT}){{0,16}}+"
# A property, with an old browser's hack in front (`*zoom:1`, `_height:1px`) or a custom
# one's dashes (`--main-color:#fff`).
_PROPERTY = r"(?:[*_]|--)?+-?[a-z][a-z0-9-]*+"
_DECLARATION = rf"{_PROPERTY}[ \t]*+:[^{{}};]{{0,300}}+"
_BLOCK = rf"\{{{_GAP}(?:{_DECLARATION};{_GAP})*+(?:{_DECLARATION})?+{_GAP}\}}"
# An at-rule that is a statement, not a block: `@import url(…);`, `@charset "utf-8";`.
_STATEMENT = r"@(?:import|charset|namespace)(?![a-z0-9_-])[^{};]{0,300}+;"
# An animation: its keyframes' selectors ("from", "to", "62.5%") are selectors only in it.
_KEYFRAME = r"(?:from|to|[0-9]{1,3}+(?:\.[0-9]{1,4}+)?%)"
_KEYFRAMES = (
    rf"@(?:-[a-z]{{1,8}}-)?keyframes[ \t]++[a-z0-9_-]{{1,64}}+{_GAP}\{{{_GAP}"
    rf"(?:{_KEYFRAME}(?:[ \t]*+,[ \t\r\n]*+{_KEYFRAME}){{0,7}}+{_GAP}{_BLOCK}{_GAP}){{0,32}}+\}}"
)
# Comments before a rule go with it.
_LEADING_COMMENTS = rf"(?:{_COMMENT}[ \t\r\n]*+){{0,8}}+"
_RULES = re.compile(
    rf"(?:{_LEADING_COMMENTS}(?:{_SELECTOR}{_GAP}{_BLOCK}|{_KEYFRAMES}|{_STATEMENT}){_GAP})++",
    re.IGNORECASE | re.ASCII,
)
# A brace opening a declaration: what every style rule has, and what prose almost never has.
# (A comment may come first: `{ /* theme colours */ --primary: #16baaa;`.)
_OPENS_DECLARATION = re.compile(rf"\{{{_GAP}{_PROPERTY}[ \t]*+:", re.IGNORECASE | re.ASCII)
# An image inlined as a data URI: its base64 may hold ";", which ends a declaration, and runs
# to kilobytes. Emptied before rules are looked for, wherever it is: it is no prose either.
# (Printable ASCII but quotes, brackets and spaces: a data URI cut short never takes the
# story after it.)
_DATA_URI = re.compile(
    r"url\([ \t]*+['\"]?+data:[!#-&*-~]{0,200000}+['\"]?+[ \t]*+\)", re.IGNORECASE | re.ASCII
)
# What is left of `@media (…) { rules }` once its rules are gone.
_EMPTY_AT_RULE = re.compile(r"@[a-z-]++[^{};]{0,200}+\{[ \t\r\n]*+\}", re.IGNORECASE | re.ASCII)


# Where a run of rules can start: a selector's first character (".", "#", "@", "*", "[",
# ":"), a comment's "/" (not with its "*", which may start a selector too), or a word of
# letters, digits, "_" and "-" (a word starts no later than the letter an element's name
# does). Scanned for first because `_RULES`, whose element names look behind, gives the regex
# engine no first character to skip ahead to: `_RULES.sub` tried the whole pattern at every
# character, ~0.7 µs each on Chinese prose (a tenth of `check`'s CPU on a feed whose pages
# carry CSS), where this scan skips a run of Chinese at once.
_STARTS = re.compile(r"[.#@*\[:]|/(?=\*)|[a-z][a-z0-9_-]*+", re.IGNORECASE | re.ASCII)
_ELEMENT_NAMES = (
    frozenset(name for name in HTML_ELEMENTS.split("|") if name.isalnum())
    | {f"h{level}" for level in range(1, 7)}
    | frozenset(_SELECTOR_WORDS.split("|"))
)


def strip_leaked_style(text: str) -> str:
    """`text` without the CSS rules in it (each run of rules becomes one space)."""
    if "{" not in text or _OPENS_DECLARATION.search(text) is None:
        return text
    if "data:" in text:
        text = _DATA_URI.sub("url()", text)
    text = _strip_rules(text)
    if "@" in text:
        text = _EMPTY_AT_RULE.sub(" ", text)
    return text


def _strip_rules(text: str) -> str:
    """`_RULES.sub(" ", text)`, trying a match only where one can start (`_STARTS`): at a
    word only if it is an element's name, as a simple selector's must be whole."""
    kept: list[str] = []
    done = 0
    for start in _STARTS.finditer(text):
        at = start.start()
        if at < done:  # inside the run of rules just taken out
            continue
        word = start.group()
        if word[0].isalpha() and word.lower() not in _ELEMENT_NAMES:
            continue
        rules = _RULES.match(text, at)
        if rules is not None:
            kept += (text[done:at], " ")
            done = rules.end()
    if not kept:
        return text
    kept.append(text[done:])
    return "".join(kept)
