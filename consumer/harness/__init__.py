"""The one Kafka harness: what runs the real service against a broker, shared by
`newsdedup eval --through-kafka` and the checkout's Kafka benchmarks (benchmarks/).

A broker (the one given, or a private one started with a checkout's scripts/kafka-local), a
run's own topics, `newsdedup run` processes configured for them, a producer loop, and a
reader of the output and dead-letter topics. What a run makes of the records it reads (a
score, a latency) stays with the caller.

May import: consumer.library and every package below it, though it needs only consumer.errors
(scripts/import-layers checks it).
"""
