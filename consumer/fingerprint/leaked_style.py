"""Style rules that leaked into scraped text: dropped before anything is fingerprinted.

A scraper that takes a page's text without its markup keeps what a browser would never show:
the bodies of `<style>` elements written inline, or CSS copied along with a template. Hundreds
of characters of `.hd{padding:20px 20px 0px;background:url(//…) no-repeat 0 0 #f4f4f4}`
before each story of one site make its unrelated stories look alike, and in a Chinese story
they outnumber its Chinese letters, which turns its shingling to words. CSS is plainly not
prose, so it goes, as `<style>` bodies already do when the markup is still there.

What counts as a rule is kept narrow, so that prose is never taken for one: a selector made
only of class, id, at-rule, universal or HTML element names (`.art-hd h1`, `#top`,
`@font-face`, `ul li a:hover`), then a brace holding only `property: value;` declarations.
A run of such rules goes at once; an at-rule's shell (`@media screen and (…) {` … `}`) goes
once the rules inside it are gone. Only text with a brace opening a declaration (`{color:`) is
scanned for rules: a scan costs ~0.3 ms on a long article, and a quarter of hkcnews's articles
begin with an empty placeholder, "{{}}".
"""

from __future__ import annotations

import re

from consumer.fingerprint.html_names import HTML_ELEMENTS

# Every repetition is bounded: a scan starts at each position, so an unbounded one would make
# a long run of ".a.a.a" after one "{color:" cost the square of its length.
_NAME = r"[a-z0-9_-]{1,64}+"
# One simple selector: a class, id or at-rule name, "*", or an HTML element name standing as
# a whole word, with any classes, ids, pseudo-classes and attribute tests glued to it.
_SIMPLE = (
    rf"(?:[.#]{_NAME}|@{_NAME}|\*|(?<![a-z0-9_-])(?:{HTML_ELEMENTS})(?![a-z0-9_-]))"
    rf"(?:[.#]{_NAME}|::?{_NAME}(?:\([^(){{}}]{{0,40}}\))?|\[[^\[\]{{}}]{{0,80}}\]){{0,8}}+"
)
_SELECTOR = rf"{_SIMPLE}(?:[ \t]*+[,>+~]?[ \t\n]*+{_SIMPLE}){{0,15}}+"
_DECLARATION = r"-?[a-z][a-z-]*+[ \t]*+:[^{};]{0,300}+"
_BLOCK = rf"\{{[ \t\n]*+(?:{_DECLARATION};[ \t\n]*+)*+(?:{_DECLARATION})?+\}}"
_RULES = re.compile(rf"(?:{_SELECTOR}[ \t\n]*+{_BLOCK}[ \t\n]*+)++", re.IGNORECASE | re.ASCII)
# A brace opening a declaration: what every style rule has, and what prose almost never has.
_OPENS_DECLARATION = re.compile(r"\{[ \t\n]*+-?[a-z][a-z-]*+[ \t]*+:", re.IGNORECASE | re.ASCII)
# What is left of `@media (…) { rules }` once its rules are gone.
_EMPTY_AT_RULE = re.compile(r"@[a-z-]++[^{};]{0,200}+\{[ \t\n]*+\}", re.IGNORECASE | re.ASCII)


# Where a run of rules can start: a selector's first character (".", "#", "@", "*") or a word
# of letters, digits, "_" and "-" (a word starts no later than the letter an element's name
# does). Scanned for first because `_RULES`, whose element names look behind, gives the regex
# engine no first character to skip ahead to: `_RULES.sub` tried the whole pattern at every
# character, ~0.7 µs each on Chinese prose (a tenth of `check`'s CPU on a feed whose pages
# carry CSS), where this scan skips a run of Chinese at once.
_STARTS = re.compile(r"[.#@*]|[a-z][a-z0-9_-]*+", re.IGNORECASE | re.ASCII)
_ELEMENT_NAMES = frozenset(name for name in HTML_ELEMENTS.split("|") if name.isalnum()) | {
    f"h{level}" for level in range(1, 7)
}


def strip_leaked_style(text: str) -> str:
    """`text` without the CSS rules in it (each run of rules becomes one space)."""
    if "{" not in text or _OPENS_DECLARATION.search(text) is None:
        return text
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
