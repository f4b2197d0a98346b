"""A site template shared by unrelated stories never makes them copies, and a copy that carries
the template on one side or both is still found (`newsdedup check`, real articles)."""

from __future__ import annotations

from pathlib import Path
from random import Random

import pytest
from checking import corpus, run_check, text_of
from page_templates import BASE64_BLOB, ENGLISH_FOOTER, LEAKED_CSS, LEAKED_SCRIPT, PORTAL_FOOTER

from consumer.evaluation import truth
from consumer.evaluation.edits import EditKind, Script, Text, apply_edit


def templated(article: dict) -> dict:
    return {**article, "content": LEAKED_CSS + article["content"]}


def with_footer(article: dict) -> dict:
    return {**article, "content": article["content"] + PORTAL_FOOTER}


def unrelated(n: int, max_chars: int = 10**6) -> list[dict]:
    """`n` real stories, no two of which share a fifth of their shingles."""
    chosen: list[tuple[dict, set[str]]] = []
    for article in corpus("zh_hkcnews_2017_2022", 60 * n):
        if len(article["content"]) > max_chars:
            continue
        shingles = truth.shingles(text_of(article))
        if all(len(shingles & s) < 0.2 * len(shingles | s) for _, s in chosen):
            chosen.append((article, shingles))
            if len(chosen) == n:
                return [a for a, _ in chosen]
    raise AssertionError(f"fewer than {n} unrelated stories")


def openings_beside(stories: list[dict], n: int, pool: int) -> list[dict]:
    """`n` briefs, the first 100 characters of unrelated stories (of the first `pool`), none
    sharing a fifth of its shingles with one of `stories`: that would be a copy cut short."""
    known = [truth.shingles(text_of(a)) for a in stories]
    briefs = []
    for a in unrelated(pool):
        brief = {**a, "content": a["content"][:100]}
        mine = truth.shingles(text_of(brief))
        if all(len(mine & k) < 0.2 * len(mine) for k in known):
            briefs.append(brief)
            if len(briefs) == n:
                return briefs
    raise AssertionError(f"fewer than {n} briefs beside {len(stories)} stories")


def test_a_style_block_shared_by_200_unrelated_articles_flags_none(tmp_path: Path) -> None:
    decisions = run_check(tmp_path, [templated(a) for a in unrelated(200)])
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_a_footer_longer_than_the_stories_it_follows_flags_none_of_200(tmp_path: Path) -> None:
    # Stories of 300-450 characters above a 650-character footer: two of them share more
    # than half of their shingles, which the footer alone gives them.
    stories = unrelated(200, max_chars=450)
    decisions = run_check(tmp_path, [with_footer(a) for a in stories])
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def scripted(article: dict) -> dict:
    return {**article, "content": LEAKED_SCRIPT + "\n" + article["content"]}


def test_a_portals_leaked_scripts_above_200_unrelated_stories_flag_none(tmp_path: Path) -> None:
    # 900 characters of code above stories of 300-450: by words (the code's Latin outweighs
    # the story), 199 of them were copies of the first.
    decisions = run_check(tmp_path, [scripted(a) for a in unrelated(200, max_chars=450)])
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_an_english_footer_under_200_unrelated_chinese_stories_flags_none(tmp_path: Path) -> None:
    # Stories of 300-450 characters, nearly all of them Chinese, above 600 characters of
    # English page furniture: more Latin letters than Chinese ones. Shingled by words, 196 of
    # them were copies of another; by characters, as a text three quarters Latin or less is,
    # the footer is learned as a template.
    stories = [a for a in unrelated(240, max_chars=450) if latin_share(text_of(a)) < 0.1]
    assert len(stories) >= 200
    feed = [{**a, "content": a["content"] + "\n" + ENGLISH_FOOTER} for a in stories[:200]]
    decisions = run_check(tmp_path, feed)
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def latin_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c.isascii() for c in letters) / max(1, len(letters))


def unrelated_items(n: int) -> list[dict]:
    """`n` of a broadcaster's items, from a line to a page, no two of which share a fifth of
    their shingles."""
    chosen: list[tuple[dict, set[str]]] = []
    for article in corpus("zh_cctv_xwlb_2022_2026", 12_000, min_chars=0):
        shingles = truth.shingles(text_of(article))
        if all(len(shingles & s) < 0.2 * len(shingles | s) for _, s in chosen):
            chosen.append((article, shingles))
            if len(chosen) == n:
                return [a for a, _ in chosen]
    raise AssertionError(f"fewer than {n} unrelated items")


def test_300_unrelated_news_items_of_every_length_under_a_footer_flag_none(tmp_path: Path) -> None:
    # Beside a longer page of the site, an item of a line, or a formula the window has seen
    # many times, has no story of its own and read as that page cut short. They share nothing
    # but the footer. 12 were flagged.
    decisions = run_check(tmp_path, [with_footer(a) for a in unrelated_items(300)])
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_300_unrelated_news_items_of_every_length_under_an_english_footer_flag_none_once_known(
    tmp_path: Path,
) -> None:
    # An item of a line or two beside 600 characters of English furniture was shingled by
    # words, and so its template was counted only by the few items that short, which were
    # copies of each other before it was known and never made it known. 89 were flagged; by
    # characters, none with a story is once the window has counted the footer. An item with
    # none (a record whose title and content are "undefined") is the footer alone, shingled by
    # words, and compares with the word sketch a page beside it carries.
    items = unrelated_items(300)
    feed = [{**a, "content": a["content"] + "\n" + ENGLISH_FOOTER} for a in items]
    decisions = run_check(tmp_path, feed)
    flagged = [d["id"] for d in decisions[10:] if d["decision"] != "unique"]
    storyless = {a["id"] for a in items if "undefined" in a["title"]}
    assert set(flagged) <= storyless and len(storyless) <= 1


def test_300_unrelated_news_items_under_a_blob_of_base64_flag_none(tmp_path: Path) -> None:
    # Shingled by words, the blob's letters counted as Latin, 2 were flagged. By characters,
    # a short item's dense sample reaches ranges that only the shortest pages count, the
    # candidate among them: there the blob's keys were carried by one story or two, as a
    # story's are, and taken for a story both items tell: 19 were.
    feed = [{**a, "content": a["content"] + "\n" + BASE64_BLOB} for a in unrelated_items(300)]
    decisions = run_check(tmp_path, feed)
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_300_unrelated_news_items_under_base64_and_an_english_footer_flag_none_once_known(
    tmp_path: Path,
) -> None:
    # 400 characters of base64 beside 600 of English furniture outweighed the letters of a
    # short Chinese item three to one and turned it to word shingles: the blob's few "words"
    # and the footer's were most of its shingles, where the dense view of the template does
    # not look, and 141 were flagged. Base64's letters are no words: by characters, none is
    # once the window has counted the template (before, the first pages may be, as two pages
    # under 1,000 characters of it share more than half of their texts).
    feed = [
        {**a, "content": a["content"] + "\n" + BASE64_BLOB + "\n" + ENGLISH_FOOTER}
        for a in unrelated_items(300)
    ]
    decisions = run_check(tmp_path, feed)
    assert [d["id"] for d in decisions[10:] if d["decision"] != "unique"] == []


def test_a_footer_longer_than_every_story_is_learned_from_the_pages_it_makes_copies(
    tmp_path: Path,
) -> None:
    # No longer page first to learn the 650-character footer from: 200 unrelated stories cut
    # to 250 characters under it, each sharing more than half of its text with any other.
    # The first pages are copies of each other; they count their samples all the same (each
    # has a story of its own beside the footer), so the footer is soon known and the rest are
    # unique. Counting nothing, every page was a copy of the first.
    stories = unrelated(200)
    feed = [{**a, "content": a["content"][:250] + "\n" + PORTAL_FOOTER} for a in stories]
    decisions = run_check(tmp_path, feed)
    flagged = [d["id"] for d in decisions if d["decision"] != "unique"]
    assert set(flagged) <= {a["id"] for a in stories[:5]}


def edited_copy(article: dict, i: int, kinds: list[EditKind], rng: Random) -> dict:
    """Copy `copy-i` of the article, with the edit `kinds[i % len(kinds)]`."""
    edit = apply_edit(
        kinds[i % len(kinds)],
        Text(article["title"], article["content"]),
        Script.TRADITIONAL,
        rng,
        Text("", ""),
    )
    return {**article, "id": f"copy-{i}", "title": edit.text.title, "content": edit.text.content}


def sharing_less_than_half(originals: list[dict], feed: list[dict]) -> list[str]:
    """The copies (`copy-i` of `originals[i]`) whose texts in `feed` share less than half of
    their shingles with their original's: those the story rules have to find."""
    texts = {a["id"]: text_of(a) for a in feed}
    return [
        f"copy-{i}"
        for i, a in enumerate(originals)
        if truth.jaccard(truth.shingles(texts[a["id"]]), truth.shingles(texts[f"copy-{i}"])) < 0.5
    ]


def with_copies(originals: list[dict], seed: int, wrap) -> list[dict]:
    """Each original, then an edited copy of it: `wrap` (a page template) on the copy alone,
    on the original alone, or on both, in turn; the copies are named copy-0, copy-1, …"""
    rng = Random(seed)
    kinds = [EditKind.TRUNCATION, EditKind.BOILERPLATE, EditKind.DROPPED_SENTENCES]
    feed = []
    for i, a in enumerate(originals):
        copy = edited_copy(a, i, kinds, rng)
        where = i % 3
        feed += [wrap(a) if where in (1, 2) else a, wrap(copy) if where in (0, 2) else copy]
    return feed


@pytest.mark.parametrize("wrap", [templated, scripted], ids=["style", "scripts"])
def test_a_copy_carrying_the_template_on_either_side_is_found(tmp_path: Path, wrap) -> None:
    # Leaked style rules, or a portal's scripts (whose copies were missed when the code's
    # Latin turned the pages to word shingles).
    feed = with_copies(corpus("zh_hkcnews_2017_2022", 60), 5, wrap)
    decisions = {d["id"]: d for d in run_check(tmp_path, feed)}
    missed = [f"copy-{i}" for i in range(60) if decisions[f"copy-{i}"]["decision"] == "unique"]
    assert missed == []


def test_copies_under_a_learned_footer_are_still_found(tmp_path: Path) -> None:
    # Twenty stories under the footer first, so that it is boilerplate when the copies come.
    learned = [with_footer(a) for a in unrelated(20, max_chars=450)]
    # Reposts on the same site (both under the footer), or from or to another site.
    originals = corpus("zh_hkcnews_2017_2022", 400, min_chars=1500)[:30]
    feed = with_copies(originals, 9, with_footer)
    decisions = {d["id"]: d for d in run_check(tmp_path, learned + feed)}
    assert [a["id"] for a in learned if decisions[a["id"]]["decision"] != "unique"] == []
    # Every copy found without boilerplate is found with it (one, cut short with the footer
    # on it alone, keeps just over half its text's shingles, and neither finds it).
    without = run_check(tmp_path, learned + feed, NEWSDEDUP_MATCH_BOILERPLATE_MIN_ARTICLES="0")
    found_without = {d["id"] for d in without if d["decision"] != "unique"}
    copies = [f"copy-{i}" for i in range(30)]
    missed = [c for c in copies if c in found_without and decisions[c]["decision"] == "unique"]
    assert missed == []
    assert len([c for c in copies if decisions[c]["decision"] != "unique"]) >= 28


def test_stories_of_a_sentence_under_a_learned_footer_six_times_longer_flag_none_of_200(
    tmp_path: Path,
) -> None:
    # Forty stories of 300-450 characters under the 650-character footer make it known as a
    # template; then briefs of 100 characters under it (the openings of 200 other unrelated
    # stories), any two of which share about 0.7 of their shingles, all of them the footer's.
    stories = unrelated(40, max_chars=450)
    briefs = openings_beside(stories, 200, pool=260)
    decisions = run_check(tmp_path, [with_footer(a) for a in stories + briefs])
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_briefs_under_a_template_known_from_longer_pages_flag_none_and_their_copies_are_found(
    tmp_path: Path,
) -> None:
    # A 260-character footer, known as a template from 40 long stories, but counted in the
    # densest part of a sample only by pages short enough to sample it: 12 stories of 200
    # characters. Then 20 briefs of 40 characters under it, any two of which share about
    # three quarters of their shingles, all of them the footer's, and a copy of five of them.
    footer = PORTAL_FOOTER[:260]
    stories = unrelated(120)
    long = [a for a in stories if len(a["content"]) >= 1000][:40]
    rest = [a for a in stories if len(a["content"]) >= 240 and a not in long]
    mid = [{**a, "content": a["content"][:200]} for a in rest[:12]]
    briefs: list[dict] = []
    chosen: list[set[str]] = []
    for a in rest[12:]:
        # Closing lines, as unrelated as the stories (an author may end two pieces alike).
        brief = {**a, "content": a["content"][-40:]}
        mine = truth.shingles(text_of(brief))
        if len(briefs) < 20 and all(len(mine & s) < 0.2 * len(mine) for s in chosen):
            briefs.append(brief)
            chosen.append(mine)
    copies = [
        {**b, "id": f"copy-{i}", "title": b["title"] + "！"} for i, b in enumerate(briefs[:5])
    ]
    assert (len(long), len(mid), len(briefs)) == (40, 12, 20)

    def footed(article: dict) -> dict:
        return {**article, "content": article["content"] + footer}

    decisions = run_check(tmp_path, [footed(a) for a in long + mid + briefs + copies])
    flagged = {d["id"]: d.get("matched_id") for d in decisions if d["decision"] != "unique"}
    assert flagged == {f"copy-{i}": b["id"] for i, b in enumerate(briefs[:5])}


def test_a_template_on_fifteen_of_two_hundred_stories_is_known_to_the_dense_view(
    tmp_path: Path,
) -> None:
    # A window of few stories never sees a template on 30 of them: 15 stories of 300-450
    # characters under the footer among 185 without it, then 20 briefs of 100 characters
    # under it, which the footer alone makes alike.
    stories = unrelated(220, max_chars=450)
    footed, plain = stories[:15], stories[15:200]
    briefs = openings_beside(stories[:200], 20, pool=300)
    feed = [with_footer(a) for a in footed] + plain + [with_footer(b) for b in briefs]
    decisions = run_check(tmp_path, feed)
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_copies_with_a_learned_footer_on_one_side_only_are_found(tmp_path: Path) -> None:
    # Forty stories under the footer make it known as a template. Then stories of 300-600
    # characters, each followed by a lightly edited copy with the footer on the copy alone or
    # on the original alone: the footer is longer than the story, so the two texts share
    # less than half of their shingles, while their stories share nearly all of theirs.
    learned = [with_footer(a) for a in unrelated(40, max_chars=450)]
    known = {a["id"] for a in learned}
    originals = [a for a in corpus("zh_hkcnews_2017_2022", 400) if len(a["content"]) <= 600]
    originals = [a for a in originals if a["id"] not in known][:30]
    rng = Random(3)
    kinds = [EditKind.TYPOS, EditKind.PUNCTUATION, EditKind.SWAPPED_SENTENCES]
    feed = list(learned)
    for i, a in enumerate(originals):
        copy = edited_copy(a, i, kinds, rng)
        feed += [a, with_footer(copy)] if i % 2 else [with_footer(a), copy]
    alike = sharing_less_than_half(originals, feed)
    decisions = {d["id"]: d for d in run_check(tmp_path, feed)}
    assert [a["id"] for a in learned if decisions[a["id"]]["decision"] != "unique"] == []
    # 11 of the 30 were found before the story rule, 20 before the rare-keys channel: the
    # other 10 share fewer than two band keys and lie 13-26 bits apart.
    missed = [c for c in alike if decisions[c]["decision"] == "unique"]
    assert len(alike) >= 20 and missed == [], (len(alike), missed)


def test_briefs_under_a_short_template_known_where_more_pages_count_it_flag_none(
    tmp_path: Path,
) -> None:
    # An 80-character footer of whose 65 shingles only two hash below 2^27, where every page
    # counts: too few for the window to know it there. 60 stories of 200 characters under it
    # make it known up to 2^31, where pages of their length count; 5 stories of 40 characters
    # count the rest of it, above 2^31. Then 20 briefs of 10 characters under it, any two of
    # which share about 0.8 of their shingles, all of them the footer's.
    footer = PORTAL_FOOTER[40:120]
    stories = [a for a in unrelated(150) if len(a["content"]) >= 240]
    mid = [{**a, "content": a["content"][:200]} for a in stories[:60]]
    short = [{**a, "content": a["content"][:40]} for a in stories[60:65]]
    briefs: list[dict] = []
    chosen: list[set[str]] = []
    for a in stories[65:]:
        brief = {**a, "title": "", "content": a["content"][-10:]}
        mine = truth.shingles(text_of(brief))
        if len(briefs) < 20 and all(len(mine & s) < 0.2 * len(mine) for s in chosen):
            briefs.append(brief)
            chosen.append(mine)
    assert (len(mid), len(briefs)) == (60, 20)
    feed = [{**a, "content": a["content"] + footer} for a in mid + short + briefs]
    decisions = run_check(tmp_path, feed)
    assert [d["id"] for d in decisions if d["decision"] != "unique"] == []


def test_copies_under_a_footer_and_a_list_of_related_headlines_are_found(tmp_path: Path) -> None:
    # A site's pages end with eight headlines of its recent stories above its footer: a list
    # different on every page, each headline on a few pages. Forty stories make the footer
    # known; then briefs of 250 characters, each followed by a lightly edited copy on the
    # site. The footer leaves the copy less than half of its text in common with the
    # original; the list, counted as the page's story, kept the stories' samples apart too.
    rng = Random(11)
    site_stories = unrelated(40, max_chars=450)
    titles = [a["title"] for a in site_stories]

    def on_the_site(article: dict, recent: list[str]) -> dict:
        related = "\n".join("· " + t for t in rng.sample(recent, 8))
        return {**article, "content": f"{article['content']}\n相關新聞\n{related}\n{PORTAL_FOOTER}"}

    # Each page lists headlines of the dozen stories before it (the first ones, of the first ten).
    feed = [on_the_site(a, titles[max(0, i - 12) : max(i, 10)]) for i, a in enumerate(site_stories)]
    known = {a["id"] for a in site_stories}
    # Briefs: the first 250 characters of stories.
    originals = [
        {**a, "content": a["content"][:250]}
        for a in corpus("zh_hkcnews_2017_2022", 1000)
        if len(a["content"]) >= 300 and a["id"] not in known
    ][:30]
    kinds = [EditKind.TYPOS, EditKind.PUNCTUATION, EditKind.SWAPPED_SENTENCES]
    for i, a in enumerate(originals):
        copy = edited_copy(a, i, kinds, rng)
        feed += [a, on_the_site(copy, titles[-12:])]
    alike = sharing_less_than_half(originals, feed)
    decisions = {d["id"]: d for d in run_check(tmp_path, feed)}
    assert [a for a in known if decisions[a]["decision"] != "unique"] == []
    # Each copy found in its original's cluster (some briefs are copies of an earlier one).
    cluster = {f"copy-{i}": decisions[a["id"]]["cluster_id"] for i, a in enumerate(originals)}
    missed = [
        c
        for c in alike
        if decisions[c]["decision"] == "unique" or decisions[c]["cluster_id"] != cluster[c]
    ]
    assert len(alike) >= 20 and missed == [], (len(alike), missed)
