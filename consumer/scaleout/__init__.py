"""What the two scale-out roles (consumer/roles/fingerprint.py and decide.py) share: their
topics and Kafka settings (common.py), the internal topic's and the changelog's records
(wire.py), the dedup domains' indexes (domains.py), the decide role's event-time order
(sequencing.py) and the restore from the changelog (changelog.py). They stay apart from the
roles because more than one role, a CLI command (`index restore`) or a benchmark uses them,
and none of them is a role's stage.

May import: consumer.stream and everything it may.
"""
