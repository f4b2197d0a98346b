"""`newsdedup eval`: precision, recall, F1 and speed of newsdedup and the baselines on one feed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from consumer.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure accuracy against the MinHash and SimHash baselines",
        description="Build a feed from a corpus (publish order) plus edited copies, run "
        "`newsdedup check` and the baselines on it, and report precision, recall, F1 and "
        "articles/s. Needs the `eval` extra (datasketch, simhash, matplotlib).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="corpus, JSONL (.gz): id/title/content/...")
    source.add_argument(
        "--pairs",
        help="labelled short-text pairs, JSONL (.gz): id/a/b/label (../shared/data/pairs/): "
        "reports the precision of the flags raised on them",
    )
    parser.add_argument(
        "--limit", type=int, help="first N articles in publish order, or N pairs (default all)"
    )
    parser.add_argument("--edits", type=int, default=1000, help="edited copies (default 1000)")
    parser.add_argument(
        "--baselines",
        default="minhash,simhash",
        help="comma-separated: minhash, simhash, or none (default both)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the edits (default 0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--plot", type=Path, help="write a precision/recall PNG here")
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="configuration passed to `newsdedup check`"
    )
    parser.set_defaults(handler=run)


def _baselines(value: str) -> list[str]:
    from consumer.evaluation.baselines import BASELINES

    names = [n.strip() for n in value.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise InputError(
            f"--baselines: unknown {', '.join(unknown)}; choose from {', '.join(BASELINES)}"
        )
    return names


def run(args: argparse.Namespace) -> int:
    # Imported here so that `newsdedup --help` and the service never need the eval extra.
    from consumer.config import load_config, parse_duration_ms
    from consumer.evaluation import check, report, truth
    from consumer.evaluation.baselines import BASELINES
    from consumer.evaluation.feed import CORPUS_KIND, build_feed
    from consumer.evaluation.metrics import score

    baselines = _baselines(args.baselines)
    if args.limit is not None and args.limit <= 0:
        raise InputError("--limit must be a positive number of articles")
    if args.edits < 0:
        raise InputError("--edits must be 0 or more")
    if args.config is not None and not args.config.is_file():
        raise InputError(f"--config {args.config}: no such file")
    if args.pairs is not None:
        return _run_pairs(args, baselines)

    feed = build_feed(args.data, args.limit, args.edits, args.seed)
    check.warm_up(args.config)
    # Twice: with the configured window (what the service finds), and with one holding the
    # whole feed (what its matching finds, like the baselines, which never forget).
    runs = [
        check.run_check(feed.articles, args.config),
        check.run_check(
            feed.articles,
            args.config,
            system=check.WHOLE_FEED_SYSTEM,
            environment=check.whole_feed_window(feed.articles),
        ),
    ]
    runs += [BASELINES[name](feed.articles) for name in baselines]
    similarity = truth.Truth(feed.texts())
    scores = [score(r, feed.pairs, similarity) for r in runs]
    # newsdedup forgets articles older than its window by design; the baselines never do.
    window_ms = parse_duration_ms(load_config(args.config).index.retention)
    published = {a.id: a.published_at for a in feed.articles}
    in_window = [
        p
        for p in feed.pairs
        if (published[p.later] - published[p.earlier]).total_seconds() * 1000 <= window_ms
    ]
    windowed = score(runs[0], in_window, similarity)

    corpus_pairs = sum(p.kind == CORPUS_KIND for p in feed.pairs)
    copies = sum(a.origin_id is not None for a in feed.articles)
    summary = report.FeedSummary(
        data=str(args.data),
        corpus_articles=len(feed.articles) - copies,
        edited_copies=copies,
        undated_skipped=feed.undated,
        corpus_pairs=corpus_pairs,
        edit_pairs=len(feed.pairs) - corpus_pairs,
        silver_pairs_checked=feed.silver_pairs_checked,
        seed=args.seed,
    )
    beyond = len(feed.pairs) - len(in_window)
    if args.json:
        doc = report.to_json(summary, scores)
        doc["newsdedup_within_window"] = {
            "window_ms": window_ms,
            "pairs_beyond_window": beyond,
            "recall": windowed.recall,
        }
        print(json.dumps(doc, indent=2))
    else:
        print(report.to_text(summary, scores))
        if windowed.recall is not None:
            print(
                f"\nnewsdedup's window is {load_config(args.config).index.retention}: "
                f"{beyond:,} true pairs are published further apart and cannot be found by "
                f"design; recall over the other {len(in_window):,}: {windowed.recall:.3f}. "
                f"{check.WHOLE_FEED_SYSTEM} ran with a window holding the whole feed."
            )
    if args.plot is not None:
        report.plot(summary, scores, args.plot)
    failed = [s for s in scores if s.error]
    for s in failed:
        print(f"newsdedup eval: {s.system} failed: {s.error}", file=sys.stderr)
    return 1 if failed else 0


def _run_pairs(args: argparse.Namespace, baselines: list[str]) -> int:
    from consumer.evaluation import check, pairs
    from consumer.evaluation.baselines import BASELINES

    feed = pairs.load_pairs(args.pairs, args.limit)
    check.warm_up(args.config)
    runs = [check.run_check(feed.articles, args.config)]
    runs += [BASELINES[name](feed.articles) for name in baselines]
    scores = [pairs.score_pairs(r, feed) for r in runs]
    if args.json:
        print(json.dumps(pairs.to_json(args.pairs, feed, scores), indent=2))
    else:
        print(pairs.to_text(args.pairs, feed, scores))
    failed = [s for s in scores if s.error]
    for s in failed:
        print(f"newsdedup eval: {s.system} failed: {s.error}", file=sys.stderr)
    return 1 if failed else 0
