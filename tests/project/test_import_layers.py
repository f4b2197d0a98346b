"""scripts/import-layers: the repository passes, and what it must catch is caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import-layers"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_the_repository_has_no_cycle_and_no_import_from_a_higher_layer() -> None:
    done = _run()
    assert done.returncode == 0, done.stderr
    assert "no cycle" in done.stdout


def _fails_with(root: Path, files: dict[str, str], message: str) -> None:
    """The script, run on a tree of `files`, fails and names what it found."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    done = _run("--root", str(root))
    assert done.returncode == 1
    assert message in done.stderr


def test_an_import_from_a_higher_layer_is_named(tmp_path: Path) -> None:
    _fails_with(
        tmp_path,
        {
            "indexstore/__init__.py": "",
            "consumer/__init__.py": "",
            "consumer/cli/__init__.py": "",
            "consumer/cli/progress.py": "",
            "consumer/stream/__init__.py": "",
            # Inside a function still counts: it runs too.
            "consumer/stream/loop.py": "def f():\n    from consumer.cli import progress\n",
        },
        "consumer.stream.loop imports consumer.cli.progress: a higher layer",
    )


def test_the_index_imports_nothing_of_the_service(tmp_path: Path) -> None:
    _fails_with(
        tmp_path,
        {
            "indexstore/__init__.py": "",
            "indexstore/store.py": "from consumer.errors import NewsdedupError\n",
            "consumer/__init__.py": "",
            "consumer/errors.py": "",
        },
        "indexstore.store imports consumer.errors: indexstore imports nothing outside it",
    )


def test_a_cycle_is_named(tmp_path: Path) -> None:
    _fails_with(
        tmp_path,
        {
            "indexstore/__init__.py": "",
            "consumer/__init__.py": "",
            "consumer/stream/__init__.py": "",
            "consumer/stream/a.py": "import consumer.stream.b\n",
            "consumer/stream/b.py": "from consumer.stream.a import x\n",
        },
        "import cycle: consumer.stream.a -> consumer.stream.b",
    )
