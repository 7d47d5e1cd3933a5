"""Input that is none of what ncclscope reads (random text, a binary dumped as base64, a training log of
other programs) is refused fast: a block of it is skipped, not read line by line, while nothing of any
known kind has been found in the input.

One search per block decides: the words every kind of input ncclscope reads prints at least once in
any stretch of it (NCCL's own name, a bare NCCL message's first word, an nccl-tests header or a
datatype of its rows, a matrix's GPU labels, a report's headings). A block without any of them, in an
input where nothing was recognised before it, holds nothing a reader could take: its lines are counted,
and the input's summary says how many were skipped this way. Once anything is recognised, every block
is read (a table or a matrix may go on into a block without such a word).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from ncclscope.parse.fields import message_keywords
from ncclscope.parse.grammars import terminal_regex
from ncclscope.parse.kernel_words import WORDS as KERNEL_WORDS
from ncclscope.parse.re2_pattern import escape, re2_compile, to_re2

# Words of the other kinds, found with bytes.find (C speed; rare in junk, so the checks after are few):
# the nccl-tests header (its device lines, its column titles, its footer) and failure lines (a run that
# failed at once prints nothing else), ibv_devinfo, ibstat and ibstatus, rocm-smi, fr_trace, a fragment of
# nvidia-smi -q's health sections, lspci's ACS, NCCL 2.30's parameter dump, show_gids' table, the kernel log's
# NVIDIA driver, NVSwitch and PCIe AER lines (nvidia-smi's whole reports name a GPU label, below)
WORDS: tuple[bytes, ...] = (
    *(b"  Rank ", b"nThread", b"Using devices", b"out-of-place", b"Avg bus", b"Test CUDA failure", b": Test "),
    *(b"Cuda failure", b"hca_id", b"CA '", b"Infiniband device '", b"ROCm System Management", b"between two GPUs"),
    *(b"Not all ranks joining collective", b"input_sizes=", b"Remapped Rows", b"Retired Pages"),
    *(b"failed (exitcode:", b"Root Cause (first observed failure)", b"Connection closed by peer", b"Read error ["),
    *(b"ACSCtl", b"Bus: primary="),
    *(b"ncclParam Registry Dump", b"n_gids_found", b"gids found", b"\tGID\t", b" GID "),  # 2.30 dump, show_gids
    *(word.encode() for word in KERNEL_WORDS),
)
# ... NCCL's own name, as NCCL, frameworks and command lines print it: a word of its own (NCCL INFO,
# NCCL_IB_HCA, RCCL:), or the end of a longer one before a file or call (ProcessGroupNCCL.cpp, WorkNCCL(,
# libnccl.so, nccl-tests); the characters around it are checked
NAMES = (b"NCCL", b"RCCL", b"nccl", b"rccl")
AFTER_WORD = b" _:.-]()\t"
AFTER_PART = b"_:.-("
# ... a matrix's or nvlink report's GPU label (GPU0, GPU 0:) after a blank or at a line's start
GPU = b"GPU"
GPU_LABEL = re.compile(rb"GPU ?\d+[ \t:]")  # the whole label, checked where GPU was found
# ... a row of nccl-tests: size, count and a datatype it prints (the grammar's TYPE_NAME)
TYPES = re.compile(rb"\d[ \t]+\d+[ \t]+(?:" + terminal_regex("nccl_tests", "TYPE_NAME").encode() + rb")[ \t]")
FIRST_WORD = re.compile(rb"\n[ \t]*([A-Za-z][A-Za-z_]{3,})")  # each line's (the block's first: see below)
KEYWORD = re.compile(r"[A-Za-z][A-Za-z_]{3,}")  # the first words FIRST_WORD can capture


def _bare_message_words() -> frozenset[bytes]:
    """The first words of bare NCCL messages (the grammar's first string terminals: grammars.first_keywords)
    that FIRST_WORD captures; shorter ones are too common in any text to tell anything."""
    return frozenset(w.encode() for w in message_keywords() if KEYWORD.fullmatch(w))


def _gpu_label(block: bytes) -> bool:
    """A GPU label (GPU_LABEL) at a line's start or after a blank."""
    at = block.find(GPU)
    while at != -1:
        if (at == 0 or block[at - 1 : at] in b" \t\n") and GPU_LABEL.match(block, at):
            return True
        at = block.find(GPU, at + 1)
    return False


def _named(block: bytes, name: bytes) -> bool:
    at = block.find(name)
    while at != -1:
        end = at + len(name)
        after = block[end : end + 1]
        alone = at == 0 or not block[at - 1 : at].isalnum()
        if after and after in (AFTER_WORD if alone else AFTER_PART):
            return True
        at = block.find(name, end)
    return False


def holds_known_words(block: bytes, bare_words: frozenset[bytes]) -> bool:
    """Whether a reader could take anything in `block` (see the module's docstring): one RE2 search where RE2
    is used (_one_search), else each test in turn, NCCL's name first (in a real log the first stops at once)."""
    search = _one_search(bare_words)
    if search is not None:
        return search(block) is not None
    if any(_named(block, name) for name in NAMES):
        return True
    if _gpu_label(block):
        return True
    if any(word in block for word in WORDS) or TYPES.search(block):
        return True
    return any(word in bare_words for word in FIRST_WORD.findall(b"\n" + block[:200])) or any(
        word in bare_words for word in FIRST_WORD.findall(block)
    )


@cache
def _one_search(bare_words: frozenset[bytes]) -> Callable[[bytes], Any] | None:
    """holds_known_words's tests as one RE2 expression (re2_pattern.py): junk is read once, at the
    automaton's speed, where the tests in turn read it once per word."""
    names = b"(?:" + b"|".join(escape(n) for n in NAMES) + b")"
    tests = [
        b"(?:^|[^A-Za-z0-9])" + names + b"[" + b"".join(escape(bytes([c])) for c in AFTER_WORD) + b"]",
        names + b"[" + b"".join(escape(bytes([c])) for c in AFTER_PART) + b"]",
        b"(?:^|[ \\t])" + to_re2(GPU_LABEL).encode("latin-1"),
        *(escape(word) for word in WORDS),
        to_re2(TYPES).encode("latin-1"),
        b"^[ \\t]*(?:" + b"|".join(escape(w) for w in sorted(bare_words)) + b")(?:[^A-Za-z_]|$)",
    ]
    compiled = re2_compile(b"(?m)" + b"|".join(b"(?:" + t + b")" for t in tests))
    return compiled.search if compiled is not None else None


class JunkSkipper:
    """Decides, block by block, whether a block can be skipped: see the module's docstring."""

    def __init__(self) -> None:
        self._bare_words: frozenset[bytes] | None = None
        self.skipped_lines = 0

    def skip(self, block: bytes, anything_found: bool) -> bool:
        if anything_found:
            return False
        if self._bare_words is None:
            self._bare_words = _bare_message_words()
        if holds_known_words(block, self._bare_words):
            return False
        self.skipped_lines += block.count(b"\n") + 1
        return True
