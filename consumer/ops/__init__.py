"""What an operator watches: metrics, health endpoints, structured logs, memory hand-back.

May import: consumer.config, consumer.errors.
"""
