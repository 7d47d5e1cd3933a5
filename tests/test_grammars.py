"""The built-parser cache: kept only where no other user can plant a file (Lark reads it with pickle)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ncclscope.parse import grammars

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX ownership and modes")


def test_cache_lives_in_a_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    where = grammars._cache_file("nccl_log", ["record"])
    assert isinstance(where, str)
    folder = Path(where).parent
    assert folder == tmp_path / "cache" / "ncclscope"
    assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0
    assert not where.startswith(tempfile.gettempdir() + os.sep + ".lark")


def test_no_cache_in_a_folder_others_can_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    (shared / "ncclscope").mkdir(parents=True)
    os.chmod(shared / "ncclscope", 0o777)  # like /tmp: anyone could leave a pickle there
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert grammars._cache_file("nccl_log", ["record"]) is False


def test_no_cache_when_the_folder_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert grammars._cache_file("nccl_log", ["record"]) is False


def test_a_planted_file_in_the_temp_dir_is_never_read(tmp_path: Path) -> None:
    """Lark's default cache name in the temp dir: a hostile pickle there must not run."""
    marker = tmp_path / "ran"
    planted = tmp_path / "tmp"
    planted.mkdir()
    payload = f"import pickle, os\nclass Evil:\n    def __reduce__(self): return (os.system, ('touch {marker}',))\n"
    # Plant a hostile pickle under the name Lark's default would use, at the moment Lark computes
    # the grammar's hash (so the name is exact), just before it would look for its cache.
    script = (
        payload
        + "import tempfile\n"
        + f"tempfile.tempdir = {str(planted)!r}\n"
        + "from ncclscope.parse import grammars\n"
        + "text = grammars.grammar_text('nccl_log')\n"
        + "import lark.lark as L\n"
        + "orig = L.sha256_digest\n"
        + "def spy(s):\n"
        + "    h = orig(s)\n"
        + "    for kind in ('cache', 'cache_grammar'):\n"
        + "        import getpass, sys\n"
        + "        name = '.lark_%s_%s_%s_%s_%s.tmp' % (kind, getpass.getuser(), h, *sys.version_info[:2])\n"
        + "        fn = tempfile.gettempdir() + '/' + name\n"
        + "        with open(fn, 'wb') as f:\n"
        + "            f.write(h.encode() + b'\\n'); pickle.dump(Evil(), f); pickle.dump(Evil(), f)\n"
        + "    return h\n"
        + "L.sha256_digest = spy\n"
        + "grammars.load('nccl_log', ('record',))\n"
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(planted.iterdir()), "the planted files were not written: the test would prove nothing"
    assert not marker.exists()


def test_the_built_parser_kept_between_runs_parses_as_the_one_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole built parser is kept in the private folder (start-up, issue 41): read back, it gives the
    same trees as a parser built from the grammar; a damaged file is built again and replaced."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    grammars.load.cache_clear()
    try:
        first = grammars.load("nccl_log", ("record",))
        built = list((tmp_path / "cache" / "ncclscope").glob("nccl_log-record-*.built"))
        assert len(built) == 1
        grammars.load.cache_clear()
        again = grammars.load("nccl_log", ("record",))
        assert again is not first and type(again).__name__ == "Lark"
        lines = [
            line
            for path in sorted((Path(__file__).parent.parent / "fixtures" / "nccl").glob("*.log"))
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[:60]
            if " NCCL " in line
        ]
        assert len(lines) > 500

        def outcome(parser, line: str) -> str:  # type: ignore[no-untyped-def]
            try:
                return str(parser.parse(line))
            except Exception as error:  # noqa: BLE001 - the same refusal is what is compared
                return type(error).__name__

        assert [outcome(again, line) for line in lines] == [outcome(first, line) for line in lines]
        built[0].write_bytes(b"cut short")
        grammars.load.cache_clear()
        assert type(grammars.load("nccl_log", ("record",))).__name__ == "Lark"
        assert built[0].read_bytes() != b"cut short"
    finally:
        grammars.load.cache_clear()


def test_an_edited_grammar_is_never_served_from_the_built_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lark_cache = grammars._cache_file("nccl_log", ["record"])
    assert isinstance(lark_cache, str)
    before = grammars._built_file(lark_cache, "nccl_log")
    grammars.grammar_text.cache_clear()
    monkeypatch.setattr(grammars, "grammar_text", lambda name: 'start: "edited"\n')
    assert grammars._built_file(lark_cache, "nccl_log") != before


def test_the_nccl_log_grammar_is_its_folders_files_in_the_order_of_their_names() -> None:
    """grammars/nccl_log/: one grammar in a file per group of record families, joined whole and in order."""
    parts = sorted((grammars.grammar_dir() / "nccl_log").glob("*.lark"))
    assert len(parts) > 1
    assert grammars.grammar_text("nccl_log") == "".join(p.read_text(encoding="utf-8") for p in parts)
    names = [p.name for p in parts]
    assert names[0] == "00_record.lark"  # the prefix and the start rules come first


def test_the_readers_quick_filters_take_their_patterns_from_the_grammars() -> None:
    """A record's timestamp and a test binary's name are written once, in the grammars; the pre-filters that
    find them before the grammar is asked use that text (grammars.terminal_regex)."""
    import re

    import pytest

    from ncclscope.parse import nccl_tests, normalize

    timestamp = grammars.terminal_regex("nccl_log", "TIMESTAMP")
    assert normalize.RECORD_PREFIX_RE.pattern.startswith(f"(?:{timestamp}[ \\t])?")
    assert re.fullmatch(timestamp, "[2025-03-01 12:00:01]") and not re.fullmatch(timestamp, "[3]")
    lead = grammars.terminal_regex("nccl_tests", "INVOCATION_LEAD")
    assert lead.endswith(f"(?={nccl_tests._INVOCATION.pattern})")
    assert nccl_tests._INVOCATION.search("$ ./build/all_reduce_perf -b 8 -e 8G")
    with pytest.raises(LookupError, match="NO_SUCH"):
        grammars.terminal_regex("nccl_log", "NO_SUCH")


def test_a_refused_text_is_refused_as_lark_alone_refuses_it_without_the_lexer_of_every_terminal() -> None:
    """Lark's contextual lexer tries a lexer of every terminal on a text it cannot read, to word a finer error
    (0.08 s to build for nccl_log): grammars.load leaves it out. Every line parses to the same tree, and every
    line refused is refused, as one that ran out of text (what nccl_log.py reads from an error) or not."""
    from lark import Lark
    from lark.exceptions import LarkError, UnexpectedToken

    loaded = grammars.load("nccl_log", ("record",))
    assert type(loaded.parser.lexer.root_lexer).__name__ == "_RefuseAtOnce"
    own = Lark(
        grammars.grammar_text("nccl_log"), parser="lalr", lexer="contextual", start=["record"], maybe_placeholders=False
    )
    assert type(own.parser.lexer.root_lexer).__name__ != "_RefuseAtOnce"
    lines = [
        line
        for path in sorted((Path(__file__).parent.parent / "fixtures" / "nccl").glob("*.log"))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[:40]
        if " NCCL " in line
    ]
    # and the same lines cut short, with a word the grammar knows elsewhere, with junk
    lines += [line[: len(line) // 2] for line in lines[::3]] + [f"{line} Init COMPLETE ###" for line in lines[::5]]
    assert len(lines) > 500

    def outcome(parser: Lark, line: str) -> str:
        try:
            return str(parser.parse(line))
        except UnexpectedToken as error:
            return "ran out" if error.token.type == "$END" else "refused"
        except LarkError:
            return "refused"

    assert [outcome(loaded, line) for line in lines] == [outcome(own, line) for line in lines]
    assert {"ran out", "refused"} <= {outcome(loaded, line) for line in lines}
