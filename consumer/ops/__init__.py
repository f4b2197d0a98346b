"""What an operator watches: metrics, health endpoints, structured logs, memory hand-back, the
progress lines of long commands.

May import: consumer (its version), consumer.config, consumer.errors.
"""
