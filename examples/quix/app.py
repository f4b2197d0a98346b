"""Near-duplicate news removal as a Quix Streams application, deciding through newsdedup.

    BROKER_ADDRESS=localhost:9092 INPUT_TOPIC=articles OUTPUT_TOPIC=decisions \
        python examples/quix/app.py

Reads articles (JSON objects: id, title, content, published_at) from INPUT_TOPIC, decides
each against the index in INDEX_DIR, and writes its decision to OUTPUT_TOPIC: JSON keyed by
the article id, the fields of `Decision.to_dict()`. A correction (an article decided again once
an earlier-published original of it arrives) is written the same way, so the latest message
per key is each article's decision. Stop it with Ctrl+C or SIGTERM.

Run one instance: the index is a directory on this machine. What the newsdedup service gives
that this does not is in docs/library.md.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from newsdedup import Deduplicator, InvalidArticle
from quixstreams import Application, message_context
from quixstreams.models.serializers import SerializationError

# Quix's own logger, which Application sets up: the example's lines look like Quix's.
logger = logging.getLogger("quixstreams")


def skip_undecodable(exc: Exception, message: Any, log: logging.Logger) -> bool:
    """A message that is not JSON is logged and skipped; any other consumer error stops."""
    if not isinstance(exc, SerializationError):
        return False
    where = message.topic(), message.partition(), message.offset()
    log.warning("skipped %s[%s]@%s: not JSON (%s)", *where, exc)
    return True


def main() -> None:
    app = Application(
        broker_address=os.environ.get("BROKER_ADDRESS", "localhost:9092"),
        consumer_group=os.environ.get("CONSUMER_GROUP", "newsdedup-quix"),
        auto_offset_reset="earliest",
        on_consumer_error=skip_undecodable,
    )
    articles = app.topic(os.environ.get("INPUT_TOPIC", "articles"), value_deserializer="json")
    decisions = app.topic(
        os.environ.get("OUTPUT_TOPIC", "decisions"), key_serializer="str", value_serializer="json"
    )

    # workers=None: each call holds one article, which is fingerprinted fastest in this
    # process; worker processes pay off only for batches.
    with Deduplicator(os.environ.get("INDEX_DIR", "state/newsdedup"), workers=None) as dedup:

        def decide(article: dict[str, Any]) -> list[dict[str, Any]]:
            """The article's decision, then the corrections it made (usually none)."""
            where = message_context()
            try:
                decided = dedup.decide_many([article])
            except InvalidArticle as e:
                logger.warning(
                    "skipped %s[%s]@%s: %s (field %s)",
                    where.topic,
                    where.partition,
                    where.offset,
                    e.reason,
                    e.field,
                )
                return []
            # `source` is where the deciding message was read, as the service writes it (the
            # library can only number the articles it was handed).
            source = {"topic": where.topic, "partition": where.partition, "offset": where.offset}
            return [{**d.to_dict(), "source": source} for d in (*decided, *decided.corrections)]

        sdf = app.dataframe(articles)
        # expand: one input message gives as many output messages as decide returns.
        sdf = sdf.apply(decide, expand=True)
        sdf.to_topic(decisions, key=lambda decision: decision["id"])
        app.run()


if __name__ == "__main__":
    main()
