"""The documentation site: it builds with `mkdocs build --strict` (a broken link, a missing
anchor or a page left out of nav fails), every page renders in a real browser with its
navigation, the generated pages cannot drift from the code, and README stays short."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SITE_NAME = "newsdedup"
sys.path.insert(0, str(REPO_ROOT / "docs"))
import hooks  # noqa: E402  (docs/hooks.py: the generators and the configuration check)


def _nav_pages(nav: list, pages: dict[str, str] | None = None) -> dict[str, str]:
    """{source path: title the page is given} for every page in mkdocs.yml's nav."""
    pages = {} if pages is None else pages
    for entry in nav:
        if isinstance(entry, str):
            pages[entry] = _first_heading(entry)
            continue
        ((label, target),) = entry.items()
        if isinstance(target, list):
            _nav_pages(target, pages)
        else:
            pages[target] = label
    return pages


def _first_heading(source: str) -> str:
    text = (REPO_ROOT / "docs" / source).read_text(encoding="utf-8")
    return re.search(r"^# (.+)$", text, re.MULTILINE).group(1)


NAV = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
PAGES = _nav_pages(NAV)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO_ROOT)}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI; `make system-deps` installs it")
        pytest.skip("chromium is not installed (`make system-deps` installs it)")
    return path


# Every page in one browser process, each in a frame of one harness page: a Chromium start
# per page costs ~2 s on a loaded 2-core machine. The load event waits for every frame; file
# pages may read each other only with --allow-file-access-from-files.
HARNESS = """<!doctype html><html><body>%s<pre id="results"></pre><script>
window.addEventListener("load", () => {
  const results = [];
  for (const frame of document.querySelectorAll("iframe")) {
    const doc = frame.contentDocument;
    const nav = doc && doc.querySelector("nav.md-nav--primary");
    results.push({
      page: frame.dataset.page,
      title: doc ? doc.title : null,
      nav: nav ? Array.from(nav.querySelectorAll("a[href]"), a => a.getAttribute("href")) : null,
      heading: doc ? !!doc.querySelector("article h1") : false,
      rendered: doc ? doc.body.scrollHeight > 0 : false,
      images: doc ? Array.from(doc.images, i => [i.getAttribute("src"), i.naturalWidth > 0]) : [],
    });
  }
  document.getElementById("results").textContent = JSON.stringify(results);
});
</script></body></html>"""


def _render_all(chromium: str, site: Path, html_pages: list[str], profile: Path) -> list[dict]:
    frames = "".join(f'<iframe src="{page}" data-page="{page}"></iframe>' for page in html_pages)
    harness = site / "_render-check.html"
    harness.write_text(HARNESS % frames, encoding="utf-8")
    result = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # as root, e.g. in CI containers, Chromium needs this
            "--disable-gpu",
            "--no-first-run",
            "--allow-file-access-from-files",
            f"--user-data-dir={profile}",
            "--dump-dom",
            harness.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = re.search(r'<pre id="results">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found and found.group(1), f"the harness reported nothing: {result.stdout[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def test_every_page_renders_with_its_navigation(site: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    html_pages = {src.replace(".md", ".html"): src for src in PAGES}
    results = _render_all(chromium, site, list(html_pages), tmp_path / "profile")
    assert [r["page"] for r in results] == list(html_pages)
    for r in results:
        src = html_pages[r["page"]]
        expected = SITE_NAME if src == "index.md" else f"{PAGES[src]} - {SITE_NAME}"
        assert r["title"] == expected, f"{src}: title {r['title']!r}"
        assert r["rendered"] and r["heading"], f"{src}: no page heading rendered"
        assert r["nav"] is not None, f"{src}: no navigation"
        broken = [image for image, shown in r["images"] if not shown]
        assert not broken, f"{src}: images not shown: {broken}"
        here = Path(r["page"]).parent
        links = {os.path.normpath(here / href.split("#")[0]) for href in r["nav"]}
        assert links >= set(html_pages), f"{src}: navigation misses {set(html_pages) - links}"


def test_benchmarks_page_shows_its_plots(site: Path) -> None:
    page = (site / "benchmarks.html").read_text(encoding="utf-8")
    for plot in sorted((REPO_ROOT / "benchmarks" / "plots").glob("*.svg")):
        assert f'src="benchmarks/plots/{plot.name}"' in page, f"{plot.name} is not on the page"
        assert (site / "benchmarks" / "plots" / plot.name).read_bytes() == plot.read_bytes()


def test_cli_reference_lists_every_command(site: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    from consumer.cli import build_parser

    page = (site / "cli.html").read_text(encoding="utf-8")
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in commands:
        assert f"newsdedup {name}</code>" in page, name
    assert "--through-kafka" in page and "--from-feed" in page


def test_configuration_check_catches_drift() -> None:
    page = (REPO_ROOT / "docs" / "operating" / "configuration.md").read_text(encoding="utf-8")
    assert hooks.config_table_problems(page) == []
    changed_default = page.replace("| `[index] segment` | `1h` |", "| `[index] segment` | `2h` |")
    assert hooks.config_table_problems(changed_default) == [
        "index.segment: the table says '2h', newsdedup.toml says '1h'"
    ]
    dropped = "\n".join(
        line for line in page.splitlines() if not line.startswith("| `[service] stop_timeout`")
    )
    assert any("stop_timeout" in p for p in hooks.config_table_problems(dropped))


def test_readme_is_short_and_cites_only_files_in_the_repository() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n") <= 200
    for doc in [
        REPO_ROOT / "README.md",
        REPO_ROOT / "BENCHMARKS.md",
        *REPO_ROOT.glob("docs/**/*.md"),
    ]:
        text = doc.read_text(encoding="utf-8")
        for missing in ("DESIGN.md", "FINDINGS.md", "../shared/", "shared/*.md"):
            # The corpora under ../shared/data are read at run time, and may be named.
            cited = re.findall(re.escape(missing) + r"(?!data)", text)
            assert not cited, f"{doc.name} cites {missing}"
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", readme):
        assert (REPO_ROOT / target).is_file(), f"README links to a missing {target}"
