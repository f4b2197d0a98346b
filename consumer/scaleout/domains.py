"""The decide role's indexes: one IndexStore per dedup domain, grouped by internal partition.

    [index] path/partition-<N>/domain=<percent-encoded domain>/   (a RocksDB index)

A partition is the unit of ownership (the consumer group moves partitions, never domains), so a
partition's directory is what an instance opens on assignment and closes on revocation. Each
store keeps, beside its input positions, how far into its changelog partition it is known to
be complete (`CHANGELOG_POSITION`): restoring starts there instead of at offset 0.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote

from consumer.config import IndexConfig
from consumer.stream.state import ensure_private_dir, open_index
from indexstore import IndexStore

CHANGELOG_POSITION = "changelog"
_DOMAIN_PREFIX = "domain="
# A domain names a directory, whose name the file system limits to 255 bytes.
MAX_DOMAIN_NAME_BYTES = 200


def domain_dir_name(domain: str) -> str:
    """The directory of `domain`'s index; raises ValueError for a domain that cannot name one
    (not Unicode text, or too long once percent-encoded)."""
    try:
        name = _DOMAIN_PREFIX + quote(domain, safe="", errors="strict")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode text (a lone surrogate)") from None
    if len(name) > MAX_DOMAIN_NAME_BYTES:
        raise ValueError(
            f"is too long for a dedup domain ({len(name)} bytes percent-encoded, "
            f"at most {MAX_DOMAIN_NAME_BYTES})"
        )
    return name


class DomainStores:
    def __init__(self, config: IndexConfig, root: str | Path | None = None) -> None:
        self.config = config
        self.root = Path(root or config.path)
        self._open: dict[int, dict[str, IndexStore]] = {}

    def partition_dir(self, partition: int) -> Path:
        return self.root / f"partition-{partition}"

    def open_partition(self, partition: int) -> dict[str, IndexStore]:
        """Open every domain index this partition already has on disk (none after a wipe)."""
        if partition in self._open:
            return self._open[partition]
        stores: dict[str, IndexStore] = {}
        self._open[partition] = stores
        directory = self.partition_dir(partition)
        if directory.is_dir():
            for child in sorted(directory.iterdir()):
                if child.is_dir() and child.name.startswith(_DOMAIN_PREFIX):
                    domain = unquote(child.name[len(_DOMAIN_PREFIX) :])
                    stores[domain] = open_index(self.config, str(child))
        return stores

    def store(self, partition: int, domain: str) -> IndexStore:
        stores = self.open_partition(partition)
        if domain not in stores:
            # Owner-only at every level, as the single-process index (consumer/stream/state.py).
            ensure_private_dir(self.root)
            ensure_private_dir(self.partition_dir(partition))
            path = self.partition_dir(partition) / domain_dir_name(domain)
            stores[domain] = open_index(self.config, str(path))
        return stores[domain]

    def stores(self, partition: int) -> dict[str, IndexStore]:
        return self._open.get(partition, {})

    def partitions(self) -> list[int]:
        return sorted(self._open)

    def all_stores(self) -> list[IndexStore]:
        return [s for stores in self._open.values() for s in stores.values()]

    def close_partition(self, partition: int) -> None:
        for store in self._open.pop(partition, {}).values():
            store.close()

    def close(self) -> None:
        for partition in list(self._open):
            self.close_partition(partition)

    def __enter__(self) -> DomainStores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def changelog_position(store: IndexStore) -> int:
    """Changelog offset below which every record of this store's domain is already applied."""
    return store.positions().get(CHANGELOG_POSITION, 0)
