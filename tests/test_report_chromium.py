"""The HTML report in a real headless Chromium (Debian's `chromium` package): it renders offline,
one screenshot per section (loaded at its anchor), and the page raises no console error.

Screenshots go to $NCCLSCOPE_SHOTS when set (to look at them), else to the test's tmp dir.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import pytest

from ncclscope.render.html import SECTIONS
from ncclscope.render.report import write_html_report

from conftest import analysis_of

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and os.path.exists(p)), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium) at /usr/bin/chromium"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
CASES = {
    "demo": ["fixtures/mixed/multi_host_job_problems.txt"],
    "story": ["fixtures/stories"],
}


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line or "Refused to" in line]


def _png_size(png: Path) -> tuple[int, int]:
    head = png.read_bytes()[:24]
    assert head.startswith(b"\x89PNG\r\n\x1a\n"), png
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("NCCLSCOPE_SHOTS")
    if wanted:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        return Path(wanted)
    return tmp_path_factory.mktemp("shots")


@pytest.mark.parametrize("name", sorted(CASES))
def test_report_renders_with_no_console_error(name: str, tmp_path: Path, shots_dir: Path) -> None:
    report = tmp_path / f"{name}.html"
    write_html_report(analysis_of(*CASES[name]), report)
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<section id="summary">' in dom.stdout and "</html>" in dom.stdout
    assert "<script" not in dom.stdout.lower()
    assert not _console_errors(dom.stderr), _console_errors(dom.stderr)
    full = shots_dir / f"{name}-full.png"
    shot = _chromium(tmp_path, f"--screenshot={full}", "--window-size=1280,2000", report.as_uri())
    assert shot.returncode == 0 and full.exists(), shot.stderr[-2000:]
    assert _png_size(full) == (1280, 2000)
    assert not _console_errors(shot.stderr)


def _ink(png: Path) -> float:
    """Share of pixels that are not background white: a blank screenshot has about none."""
    pixels = matplotlib.image.imread(str(png))[:, :, :3]
    return float((pixels.min(axis=2) < 0.9).mean())


def test_a_screenshot_of_each_section(tmp_path: Path, shots_dir: Path) -> None:
    """Each section alone at the top of the page (the others hidden by one added CSS rule), so that a
    screenshot of the window shows it whatever its position in the full page."""
    report = tmp_path / "story.html"
    write_html_report(analysis_of(*CASES["story"]), report)
    page = report.read_text()
    ids = [sid for sid, _ in SECTIONS if f'<section id="{sid}">' in page]
    assert {"summary", "findings", "topology", "nics", "transports", "benchmarks"} <= set(ids)
    for sid in ids:
        only = tmp_path / f"only-{sid}.html"
        only.write_text(page.replace("</style>", f"main > section:not(#{sid}) {{ display: none; }}</style>", 1))
        png = shots_dir / f"story-section-{sid}.png"
        result = _chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,1000", only.as_uri())
        assert result.returncode == 0 and png.exists(), (sid, result.stderr[-2000:])
        assert _png_size(png) == (1280, 1000)
        assert _ink(png) > 0.001, f"section {sid}: the screenshot looks blank"
        assert not _console_errors(result.stderr), (sid, _console_errors(result.stderr))


def test_hostile_input_runs_nothing(tmp_path: Path) -> None:
    """A WARN holding <script> is text in the rendered DOM, and no script element exists."""
    log = tmp_path / "hostile.log"
    log.write_text(
        "NCCL version 2.19.3+cuda12.2\n"
        "evil:1:1 [0] misc/socket.cc:484 NCCL WARN Net : Connect failed <script>console.error('pwned')</script>\n"
    )
    from ncclscope.case.read import read_case
    from ncclscope.diagnose.engine import analyze

    report = tmp_path / "hostile.html"
    write_html_report(analyze(read_case([str(log)], jobs=1).case), report)
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0
    assert not re.search(r"<script\b", dom.stdout, re.I)
    assert "&lt;script&gt;console.error('pwned')&lt;/script&gt;" in dom.stdout
    assert "pwned" not in "\n".join(_console_errors(dom.stderr))


def test_hosts_of_device_lines_and_counts_without_zero_in_the_rendered_page(tmp_path: Path) -> None:
    """Issue 41 item 7: the page listed 'No host named in the inputs' for hosts that nccl-tests' device lines
    name, and showed a red '0 error' badge; through the real CLI, read back from Chromium's DOM."""
    from conftest import run_cli

    report = tmp_path / "r.html"
    done = run_cli("report", "fixtures/first_hour/tests_one_host_logged.txt", "-o", str(report))
    assert done.returncode in (0, 1), done.stderr
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "No host named in the inputs" not in dom.stdout
    assert "<td>cx-node11</td>" in dom.stdout
    assert "<td>cx-node12 (nccl-tests: 1x NVIDIA H100 80GB HBM3)</td>" in dom.stdout
    badges = re.findall(r'<span class="badge (\w+)">([^<]*)</span>', dom.stdout.split('<section id="findings"')[0])
    assert badges and all(not text.startswith("0") for _, text in badges), badges
    assert "badge error" not in dom.stdout.split('<section id="findings"')[0]
