"""`newsdedup eval`: precision, recall, F1 and speed of newsdedup and the baselines on one feed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from consumer.errors import InputError

if TYPE_CHECKING:  # for the annotations only: the eval extra is imported when eval runs
    from consumer.evaluation.feed import Feed
    from consumer.evaluation.kafka_answers import Delivered
    from consumer.evaluation.metrics import Scores
    from consumer.evaluation.report import FeedSummary
    from consumer.evaluation.runs import SystemRun
    from consumer.evaluation.truth import Truth

# Every baseline of consumer/evaluation/baselines.py, named here so that `--help` does not
# import the eval extra.
DEFAULT_BASELINES = ("minhash", "minhash-verified", "rensa", "rensa-verified", "simhash")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure accuracy against MinHash (datasketch, rensa) and SimHash baselines",
        description="Build a feed from a corpus (publish order) plus edited copies, run "
        "`newsdedup check` and the baselines on it, and report precision, recall, F1 and "
        "articles per second and per CPU-second. Needs the `eval` extra (datasketch, rensa, "
        "simhash, matplotlib).",
    )
    _add_feed_arguments(parser)
    _add_report_arguments(parser)
    _add_kafka_arguments(parser)
    parser.set_defaults(handler=run)


def _add_feed_arguments(parser: argparse.ArgumentParser) -> None:
    """What the feed is built from, and the systems run on it."""
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
        default=",".join(DEFAULT_BASELINES),
        help="comma-separated, or none (default all): minhash, rensa (MinHashLSH of datasketch "
        "and of rensa; any LSH candidate is a match), minhash-verified, rensa-verified (the "
        "best candidate, if its estimated Jaccard is ≥ 0.5), simhash",
    )
    parser.add_argument(
        "--templates",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="wrap this share (0..1) of the corpus articles in invented sites' page templates "
        "(leaked CSS, navigation, footers, related-article lists), and two thirds of the edited "
        "copies in their original's site's or another site's; truth and the judging of flags "
        "stay on the untemplated texts, and `tmpl` counts wrong flags between two templated "
        "articles (default 0: no templates)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the edits and templates (default 0)"
    )


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """How the results are shown, and the configuration newsdedup runs with."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--plot", type=Path, help="write a precision/recall PNG here")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="configuration passed to `newsdedup check` (and `run`)",
    )


def _add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """--through-kafka and how the service is run for it."""
    kafka = parser.add_argument_group(
        "through the service",
        "With --through-kafka, the feed also goes through a real broker and `newsdedup run`: "
        "spread over the partitions at random (--seed), the first half produced before the "
        "service starts, which is stopped and started again once that half is decided and "
        "before the second half is produced; the "
        "latest decision per article is scored like check's (row newsdedup-kafka). Without "
        "--bootstrap-servers it starts a private broker with --kafka-local, a source "
        "checkout's scripts/kafka-local.",
    )
    kafka.add_argument(
        "--through-kafka", action="store_true", help="also run the feed through the service"
    )
    kafka.add_argument(
        "--partitions", type=int, default=3, help="partitions of the input topic (default 3)"
    )
    kafka.add_argument(
        "--role",
        choices=("all", "scaleout"),
        default="all",
        help="all: one `run` (default); scaleout: 3 `run --role fingerprint` + 1 `--role decide`",
    )
    kafka.add_argument(
        "--delivery",
        choices=("at_least_once", "exactly_once"),
        default="at_least_once",
        help="[kafka] delivery of the service (default at_least_once)",
    )
    kafka.add_argument(
        "--restart",
        choices=("term", "kill"),
        default="term",
        help="how the service is stopped midway: SIGTERM (default) or SIGKILL",
    )
    kafka.add_argument(
        "--kafka-window",
        choices=("configured", "whole"),
        default="configured",
        help="the service's window: as configured, like row newsdedup (default), or holding "
        "the whole feed, like newsdedup-whole",
    )
    kafka.add_argument("--bootstrap-servers", help="an existing broker (default: a private one)")
    kafka.add_argument(
        "--kafka-local",
        type=Path,
        metavar="SCRIPT",
        help="without --bootstrap-servers: a source checkout's scripts/kafka-local, which "
        "starts the private broker",
    )


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
    from consumer.evaluation import check, clusters, truth
    from consumer.evaluation.feed import build_feed
    from consumer.evaluation.metrics import score
    from consumer.evaluation.templates import apply_templates

    baselines = _baselines(args.baselines)
    _check_arguments(args)
    if args.pairs is not None:
        return _run_pairs(args, baselines)

    feed = apply_templates(
        build_feed(args.data, args.limit, args.edits, args.seed), args.templates, args.seed
    )
    check.warm_up(args.config)
    runs, delivered = _run_systems(args, feed, baselines)
    # Truth is about the story: a page template is no part of what two articles share.
    similarity = truth.Truth(feed.story_texts())
    templated = feed.templated_ids() if feed.templates is not None else None
    stories = clusters.true_clusters(
        (a.id for a in feed.articles), clusters.pooled_pairs(feed.pairs, runs, similarity)
    )
    scores = [score(r, feed.pairs, similarity, templated, stories) for r in runs]
    window = _within_window(args, feed, runs[0], similarity)
    kafka_section = None
    if delivered is not None:
        # The service is held to check with the window it ran with.
        same_window = runs[1] if args.kafka_window == "whole" else runs[0]
        kafka_section = _kafka_section(
            delivered, same_window, runs[2], feed.articles, args.kafka_window
        )
    summary = _feed_summary(args, feed, stories)
    _print_report(args, summary, scores, window, kafka_section)
    failed = [s for s in scores if s.error]
    for s in failed:
        print(f"newsdedup eval: {s.system} failed: {s.error}", file=sys.stderr)
    if delivered is not None and delivered.undecided:
        print(
            f"newsdedup eval: the service left {delivered.undecided:,} articles undecided",
            file=sys.stderr,
        )
        return 1
    return 1 if failed else 0


def _check_arguments(args: argparse.Namespace) -> None:
    if args.limit is not None and args.limit <= 0:
        raise InputError("--limit must be a positive number of articles")
    if args.edits < 0:
        raise InputError("--edits must be 0 or more")
    if args.config is not None and not args.config.is_file():
        raise InputError(f"--config {args.config}: no such file")
    if args.partitions < 1:
        raise InputError("--partitions must be 1 or more")
    if not 0 <= args.templates <= 1:
        raise InputError("--templates must be a share between 0 and 1")
    if args.through_kafka and not args.bootstrap_servers:
        # Checked before the minutes of check and the baselines, not after them.
        if args.kafka_local is None:
            raise InputError(
                "--through-kafka needs a broker: --bootstrap-servers, or --kafka-local with a "
                "source checkout's scripts/kafka-local to start a private one"
            )
        if not args.kafka_local.is_file():
            raise InputError(f"--kafka-local {args.kafka_local}: no such file")
    if args.pairs is not None:
        if args.through_kafka:
            raise InputError("--through-kafka needs --data: pairs are not a feed")
        if args.templates:
            raise InputError("--templates needs --data: pairs are not pages")


def _run_systems(
    args: argparse.Namespace, feed: Feed, baselines: list[str]
) -> tuple[list[SystemRun], Delivered | None]:
    """Every system's run on the feed, in the report's order (newsdedup, newsdedup-whole,
    newsdedup-kafka if asked, the baselines), and what the service delivered (or None)."""
    from consumer.evaluation import check, through_kafka
    from consumer.evaluation.baselines import BASELINES

    # Twice: with the configured window (what the service finds), and with one holding the
    # whole feed (what its matching finds, like the baselines, which never forget).
    runs = [
        check.run_newsdedup_check(feed.articles, args.config),
        check.run_newsdedup_check(
            feed.articles,
            args.config,
            system=check.WHOLE_FEED_SYSTEM,
            environment=check.whole_feed_window(feed.articles),
        ),
    ]
    delivered = None
    if args.through_kafka:
        kafka_run, delivered = through_kafka.run_through_kafka(
            feed.articles,
            args.config,
            through_kafka.KafkaOptions(
                args.bootstrap_servers,
                args.partitions,
                args.role,
                args.delivery,
                args.restart,
                args.seed,
                args.kafka_local,
            ),
            check.whole_feed_window(feed.articles) if args.kafka_window == "whole" else None,
        )
        runs.append(kafka_run)
    runs += [BASELINES[name](feed.articles) for name in baselines]
    return runs, delivered


def _within_window(
    args: argparse.Namespace, feed: Feed, newsdedup_run: SystemRun, similarity: Truth
) -> dict:
    """newsdedup forgets articles older than its window by design; the baselines never do:
    its recall over the true pairs published within the window of each other."""
    from consumer.config import load_config
    from consumer.evaluation.metrics import score

    retention = load_config(args.config).index.retention
    published = {a.id: a.published_at for a in feed.articles}
    in_window = [
        p
        for p in feed.pairs
        if (published[p.later] - published[p.earlier]).total_seconds() * 1000 <= retention.ms
    ]
    return {
        "retention": retention,
        "pairs_within": len(in_window),
        "pairs_beyond": len(feed.pairs) - len(in_window),
        "recall": score(newsdedup_run, in_window, similarity).recall,
    }


def _feed_summary(args: argparse.Namespace, feed: Feed, stories: dict[str, str]) -> FeedSummary:
    from consumer.evaluation import report
    from consumer.evaluation.feed import CORPUS_KIND

    corpus_pairs = sum(p.kind == CORPUS_KIND for p in feed.pairs)
    copies = sum(a.origin_id is not None for a in feed.articles)
    return report.FeedSummary(
        data=str(args.data),
        corpus_articles=len(feed.articles) - copies,
        edited_copies=copies,
        undated_skipped=feed.undated,
        corpus_pairs=corpus_pairs,
        edit_pairs=len(feed.pairs) - corpus_pairs,
        silver_pairs_checked=feed.silver_pairs_checked,
        seed=args.seed,
        templates=_template_summary(feed),
        **_true_cluster_sizes(stories),
    )


def _print_report(
    args: argparse.Namespace,
    summary: FeedSummary,
    scores: list[Scores],
    window: dict,
    kafka_section: dict | None,
) -> None:
    from consumer.evaluation import check, report

    if args.json:
        doc = report.feed_report_json(summary, scores)
        doc["newsdedup_within_window"] = {
            "window_ms": window["retention"].ms,
            "pairs_beyond_window": window["pairs_beyond"],
            "recall": window["recall"],
        }
        if kafka_section is not None:
            doc["through_kafka"] = kafka_section
        print(json.dumps(doc, indent=2))
    else:
        print(report.feed_report_text(summary, scores))
        if window["recall"] is not None:
            print(
                f"\nnewsdedup's window is {window['retention']}: "
                f"{window['pairs_beyond']:,} true pairs are published further apart and cannot "
                f"be found by design; recall over the other {window['pairs_within']:,}: "
                f"{window['recall']:.3f}. "
                f"{check.WHOLE_FEED_SYSTEM} ran with a window holding the whole feed."
            )
        if kafka_section is not None:
            print("\n" + _kafka_text(kafka_section))
    if args.plot is not None:
        report.plot(summary, scores, args.plot)


def _true_cluster_sizes(stories: dict[str, str]) -> dict[str, int]:
    """How many true clusters hold more than one article, and how many articles they hold."""
    from collections import Counter

    sizes = [n for n in Counter(stories.values()).values() if n > 1]
    return {"true_clusters": len(sizes), "clustered_articles": sum(sizes)}


def _template_summary(feed):
    """The report's account of the feed's page templates; None for a plain feed."""
    from collections import Counter

    from consumer.evaluation.report import TemplateSummary

    if feed.templates is None:
        return None
    t = feed.templates
    corpus_templated = sum(a.origin_id is None and a.id in t.site for a in feed.articles)
    return TemplateSummary(t.share, corpus_templated, dict(Counter(t.reposts.values())))


def _kafka_section(delivered, checked, served, articles, window: str) -> dict:
    """What the service delivered, and how its answers compare with check's on the feed."""
    from dataclasses import asdict

    from consumer.evaluation.through_kafka import matched_later

    differ = (
        None
        if checked.error or served.error
        else sum(a != b for a, b in zip(checked.decisions, served.decisions, strict=True))
    )
    return {
        **asdict(delivered),
        "window": window,
        "differ_from_check": differ,
        "check_matched_later": None if checked.error else matched_later(checked, articles),
    }


def _kafka_text(k: dict) -> str:
    role = (
        "`newsdedup run`"
        if k["role"] == "all"
        else "3 `run --role fingerprint` + 1 `run --role decide`"
    )
    stopped = "SIGKILL" if k["restart"] == "kill" else "SIGTERM"
    differ = "n/a" if k["differ_from_check"] is None else f"{k['differ_from_check']:,}"
    too_late = (
        " (all of them: the restart came too late to matter; try a larger feed or a smaller "
        "[kafka] batch_max_messages)"
        if k["decided_before_restart"] >= k["articles"]
        else ""
    )
    return " ".join(
        [
            f"newsdedup-kafka: {role}, {k['delivery']}, window {k['window']},",
            f"{k['partitions']} partitions (articles spread at random),",
            f"a backlog of {k['articles']:,} articles;",
            f"stopped ({stopped}, exit codes {k['restart_exit_codes']}) and started again",
            f"after {k['decided_before_restart']:,} were answered{too_late}.",
            f"Read back: {k['records']:,} decision records;",
            f"{k['decided']:,} articles decided, {k['rejected']:,} dead-lettered,",
            f"{k['undecided']:,} undecided; {k['repeated']:,} records repeat their article's",
            f"answer, {k['changed']:,} change it, {k['foreign']:,} are for no article of the feed.",
            f"Latest decisions: {k['late']:,} late, {k['matched_later']:,} flagged as copies of",
            f"a later-published article (check: {k['check_matched_later']}),",
            f"{differ} differ from those of check with the same window",
            f"({'newsdedup-whole' if k['window'] == 'whole' else 'newsdedup'}).",
        ]
    )


def _run_pairs(args: argparse.Namespace, baselines: list[str]) -> int:
    from consumer.evaluation import check, pairs
    from consumer.evaluation.baselines import BASELINES

    feed = pairs.load_pairs(args.pairs, args.limit)
    check.warm_up(args.config)
    runs = [check.run_newsdedup_check(feed.articles, args.config)]
    runs += [BASELINES[name](feed.articles) for name in baselines]
    scores = [pairs.score_pairs(r, feed) for r in runs]
    if args.json:
        print(json.dumps(pairs.pairs_report_json(args.pairs, feed, scores), indent=2))
    else:
        print(pairs.pairs_report_text(args.pairs, feed, scores))
    failed = [s for s in scores if s.error]
    for s in failed:
        print(f"newsdedup eval: {s.system} failed: {s.error}", file=sys.stderr)
    return 1 if failed else 0
