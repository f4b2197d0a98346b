"""The CPU stage: parse and fingerprint messages in a pool of worker processes.

Workers return only what deciding needs (id, event time, fingerprint), never the article text,
so the pipes between processes carry little more than the input itself.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.pool
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence

from consumer.config import FingerprintConfig, InputConfig
from consumer.errors import NewsdedupError
from consumer.fingerprint.fingerprinter import Fingerprint, Fingerprinter, FingerprintOptions
from consumer.ops.memory import collect_cycles_less_often
from consumer.records import Analyzed, Invalid, InvalidReason
from consumer.stream.parsing import parse_article

log = logging.getLogger(__name__)


def _analyzed(article_id: str, event_time_ms: int, fp: Fingerprint, dated: bool) -> Analyzed:
    return Analyzed(
        article_id,
        event_time_ms,
        fp.simhash,
        fp.content_hash,
        fp.sketch,
        bands=fp.bands,
        shingles=fp.shingles,
        text_chars=fp.text_chars,
        dated=dated,
    )


# (message value, fallback event time in ms: the Kafka timestamp)
Work = tuple[bytes | None, int]

# Articles per chunk handed to a worker, at most (fewer when a batch is small).
_CHUNK_ARTICLES = 128


def fingerprint_options(config: FingerprintConfig) -> FingerprintOptions:
    return FingerprintOptions(
        engine=config.engine,
        idf_path=config.idf_path or None,
        title_weight=config.title_weight,
        max_terms=config.max_terms or None,
        max_chars=config.max_chars,
        convert_traditional=config.convert_traditional,
    )


class _Worker:
    """Per-process state: the fingerprinter is built once per process, not per message."""

    def __init__(self, input_config: InputConfig, options: FingerprintOptions) -> None:
        self.input_config = input_config
        self.fingerprinter = Fingerprinter(options)

    def analyze(self, work: Work) -> Analyzed | Invalid:
        value, fallback_ms = work
        try:
            parsed = parse_article(value, fallback_ms, self.input_config)
            if isinstance(parsed, Invalid):
                return parsed
            fp = self.fingerprinter.fingerprint(parsed.title, parsed.content)
        except NewsdedupError as e:
            return Invalid(InvalidReason.EMPTY_TEXT, str(e)[:300])
        except Exception as e:  # a bug must not stop the feed; the DLQ keeps the message
            log.exception("analysis failed")
            return Invalid(InvalidReason.INTERNAL_ERROR, f"{type(e).__name__}: {e}"[:300])
        return _analyzed(parsed.id, parsed.event_time_ms, fp, parsed.dated)

    def analyze_many(self, works: Sequence[Work]) -> list[Analyzed | Invalid]:
        """Parse every message, then fingerprint the valid articles in one batch (about 1.5×
        as fast as article by article: benchmarks/history/2026-11-23.md, "Batch path")."""
        try:
            parsed = [parse_article(value, ms, self.input_config) for value, ms in works]
            articles = [a for a in parsed if not isinstance(a, Invalid)]
            fingerprints = iter(
                self.fingerprinter.fingerprint_many([(a.title, a.content) for a in articles])
            )
        except Exception:
            # A bug must not turn a whole batch into internal errors: message by message, only
            # the message that triggers it does.
            log.exception("batch analysis failed; analyzing message by message")
            return [self.analyze(w) for w in works]
        results: list[Analyzed | Invalid] = []
        for article in parsed:
            if isinstance(article, Invalid):
                results.append(article)
                continue
            fp = next(fingerprints)
            if isinstance(fp, NewsdedupError):
                results.append(Invalid(InvalidReason.EMPTY_TEXT, str(fp)[:300]))
            else:
                results.append(_analyzed(article.id, article.event_time_ms, fp, article.dated))
        return results


_process_worker: _Worker | None = None
# How often a worker checks that the service that started it still runs.
_PARENT_CHECK_S = 1.0


def _init_process(input_config: InputConfig, options: FingerprintOptions) -> None:
    global _process_worker
    # A stop signal sent to the whole process group (`kill -- -PGID`, `timeout`, systemd)
    # reaches the workers too. The service ends them itself once its batch is done; dying
    # here would lose a chunk in flight, or, idle, die holding the pool's task-queue lock, on
    # which the pool's shutdown then waits for ever. SIGINT would print a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _exit_with_parent(os.getppid())
    collect_cycles_less_often()
    _process_worker = _Worker(input_config, options)


def _exit_with_parent(parent: int) -> None:
    """Exit when the service is gone (SIGKILL): a worker waits on its task queue for ever."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    # The workers ignore SIGTERM (see _init_process): ending the pool takes SIGKILL.
    def terminate(self) -> None:
        self.kill()


class _Pool(multiprocessing.pool.Pool):
    # The factory Pool calls for each worker.
    @staticmethod
    def Process(ctx, *args, **kwds):
        return _WorkerProcess(*args, **kwds)


def _analyze_chunk(works: Sequence[Work]) -> list[Analyzed | Invalid]:
    assert _process_worker is not None
    return _process_worker.analyze_many(works)


class Analyzer:
    """Parses and fingerprints batches, in `workers` processes (0 = one per core) or, with
    `workers=None`, in this process (tests and tiny inputs).

    With `pool_after_s`, the first batches are fingerprinted in this process and the workers
    start only once that much CPU time went into it: starting them costs ~0.7 CPU-seconds
    each (a spawned interpreter, imports, the segmenter's dictionary), more than a small
    input's whole fingerprinting, and wall time only gains from them past a few seconds.
    Given `input_bytes`, the size of the whole input, they do not start either when what is
    left of it would take less than `pool_after_s` here, at the pace so far: near its end, a
    mid-sized input would pay for workers that have almost nothing left to do."""

    def __init__(
        self,
        input_config: InputConfig,
        fingerprint_config: FingerprintConfig,
        workers: int | None = 0,
        pool_after_s: float = 0.0,
        input_bytes: int | None = None,
    ) -> None:
        options = fingerprint_options(fingerprint_config)
        self._input_config, self._options = input_config, options
        self._inline: _Worker | None = None
        self._inline_cpu_s = 0.0
        self._inline_bytes = 0
        self._input_bytes = input_bytes
        self._pool: _Pool | None = None
        self.workers = 0 if workers is None else workers or os.cpu_count() or 1
        self._pool_after_s = float("inf") if workers is None else pool_after_s
        if self._pool_after_s > 0:
            self._inline = _Worker(input_config, options)
        else:
            self._start_pool()

    def _start_pool(self) -> None:
        # spawn, not fork: the parent holds librdkafka threads and RocksDB handles that a
        # forked child must not inherit.
        self._pool = _Pool(
            self.workers,
            initializer=_init_process,
            initargs=(self._input_config, self._options),
            context=multiprocessing.get_context("spawn"),
        )

    def _analyze_inline(self, works: Sequence[Work]) -> Iterator[list[Analyzed | Invalid]]:
        assert self._inline is not None
        started = time.process_time()
        results = self._inline.analyze_many(works)
        self._inline_cpu_s += time.process_time() - started
        self._inline_bytes += sum(len(value) for value, _ in works if value)  # None: a tombstone
        # A batch asked for before the pool started runs here even once it has: `check` asks
        # for the next batch ahead. Only the first to pass the mark starts the workers.
        if (
            self._pool is None
            and self._inline_cpu_s >= self._pool_after_s
            and self._left_s() >= self._pool_after_s
        ):
            self._start_pool()  # for the next batch
        yield results

    def _left_s(self) -> float:
        """CPU seconds the rest of the input would take here, at the pace so far; infinite
        when its size is not known."""
        if self._input_bytes is None or not self._inline_bytes:
            return float("inf")
        left = self._input_bytes - self._inline_bytes
        return left * self._inline_cpu_s / self._inline_bytes

    def analyze(self, works: Sequence[Work]) -> list[Analyzed | Invalid]:
        return [result for part in self.analyze_chunks(works) for result in part]

    def analyze_chunks(self, works: Sequence[Work]) -> Iterator[list[Analyzed | Invalid]]:
        """The results in input order, chunk by chunk as soon as each chunk is done, so the
        caller can decide the first chunks while the workers still fingerprint the rest.

        The workers start on `works` at once, before the first chunk is asked for: a caller
        can hand over its next batch while it still decides this one."""
        if self._pool is None:
            return self._analyze_inline(works)
        if not works:
            return iter(())
        # Several chunks per worker balance uneven article sizes, and small ones keep the
        # workers' idle tail at the end of a batch short; but each chunk costs the deciding
        # side a vectorized index search, whose fixed cost made 32-article chunks the
        # largest cost of `check` on short news (benchmarks/history/2026-11-24.md,
        # "`check` at five times MinHash's speed").
        n_chunks = min(len(works), max(self.workers * 4, -(-len(works) // _CHUNK_ARTICLES)))
        size = -(-len(works) // n_chunks)
        return self._pool.imap(
            _analyze_chunk, [works[i : i + size] for i in range(0, len(works), size)]
        )

    def kill(self) -> None:
        """End the workers at once, from any thread, without the pool's locks: for a process
        about to exit without its clean-up (os._exit), which would leave them running."""
        pool = self._pool
        for process in getattr(pool, "_pool", None) or ():
            if process.exitcode is None:
                process.kill()

    def close(self) -> None:
        # A batch asked for earlier may still be fingerprinted here: it must not start workers
        # that nothing would end.
        self._pool_after_s = float("inf")
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __enter__(self) -> Analyzer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
