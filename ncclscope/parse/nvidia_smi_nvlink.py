"""`nvidia-smi nvlink -s` output (grammars/nvidia_smi_nvlink.lark): each GPU's NVLinks, with the speed of each
active link or `<inactive>`. `nvlink -c` capability lines are read too (they say nothing about state).

A GPU line alone is also what `nvidia-smi -L` prints: a GPU is kept only once a link line follows it.
"""

from __future__ import annotations

import re

from lark.exceptions import LarkError

from ncclscope.model import Evidence, NvlinkGpu, NvlinkLink
from ncclscope.parse.grammars import load
from ncclscope.parse.line_hints import STRIPPED

# spaces may have become tabs in a paste (the grammar takes any inline white space)
GPU_RE = re.compile(r"^GPU\s+\d+:\s.*\(UUID:\s")
# a GPU line glued after other text (the shell prompt's command, when a paste lost the line break)
GLUED_GPU_RE = re.compile(r"GPU\s+\d+:\s[^()]*\(UUID:\s[^()]*\)\s*$")
LINK = r"Link\s+\d+\s*[:,]"
LINK_RE = re.compile(rf"^{LINK}")
ALL_INACTIVE_RE = re.compile(r"^NVML:\s+Unable to retrieve NVLink information")
CUT_LINK = r"L(?:i(?:n(?:k(?:\s+\d*)?)?)?)?"
CUT_LINK_RE = re.compile(rf"^{CUT_LINK}$")  # a link line cut before its colon


class NvidiaSmiNvlinkReader:
    """Reads the lines of one input that belong to `nvidia-smi nvlink -s` / `-c` output."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.gpus: list[NvlinkGpu] = []
        self._gpu: NvlinkGpu | None = None
        self._kept = False  # the current GPU is in self.gpus (a link line came)
        # link lines that belong to no GPU (its line lost, or damaged): [first line, how many], not read
        self._orphans: list[list[int]] = []
        self._in_orphans = False  # the last line fed was one of them
        self._after = False  # the last line fed was nvidia-smi nvlink's
        self._damaged: list[tuple[int, int]] = []  # (line, GPU index): a link line in a GPU's listing, not read

    @property
    def problems(self) -> list[str]:
        return [
            f"line {first}: {count} NVLink line{'s' if count > 1 else ''} of no GPU (its `GPU n: ...` line is "
            "missing or damaged); not read"
            for first, count in self._orphans
        ] + [f"line {line}: an NVLink line of GPU {gpu} is cut or damaged; not read" for line, gpu in self._damaged]

    # a GPU line (alone or glued) anywhere; under a GPU, link lines and link lines cut short ("L", "Lin"): a
    # cut line is only what CUT_LINK_RE takes, with what strip() drops after it (not every line that starts
    # with an L: a base64 dump has one in 64)
    HINT_WORDS = ("GPU",)
    HINT_START = rf"{LINK}|{CUT_LINK}{STRIPPED}$"

    @property
    def busy(self) -> bool:
        """Right after the listing's own lines: the next line, whatever it holds, resets what they set."""
        return self._after or self._in_orphans

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is nvidia-smi nvlink's (then no other reader needs it)."""
        body = text.strip()
        if not body:  # a blank line (a link line the paste emptied) ends no listing
            return False
        is_gpu = GPU_RE.match(body) is not None
        read = body
        # every line of other programs comes here: the regex runs only where a GPU line can be
        if not is_gpu and "(UUID:" in body and (glued := GLUED_GPU_RE.search(body)) is not None:
            before = body[: glued.start()].strip()
            if LINK_RE.match(before):  # the previous GPU's last link line, then the next GPU's line
                self.feed(line_no, before)
            read, is_gpu = glued.group(), True
        # nvidia-smi's one line for a GPU whose links are all down, in place of them
        is_link = not is_gpu and (LINK_RE.match(body) is not None or ALL_INACTIVE_RE.match(body) is not None)
        after, self._after = self._after, False
        if is_link and self._gpu is None:
            if not after:
                return False
            self._orphan(line_no)  # nvidia-smi's, right after its other lines, under no GPU
            return True
        self._in_orphans = False
        if not is_gpu and not is_link:
            if self._gpu is not None and CUT_LINK_RE.match(body):
                return self._damage(line_no)
            # another program's line: the listing may go on after it (two outputs interleaved in a paste)
            return False
        try:
            tree = load("nvidia_smi_nvlink").parse(read)
        except LarkError:
            if is_link and self._gpu is not None:
                # cut, or another line glued on: the listing goes on (the next GPU's links, had its line
                # been glued here, start again from link 0: see below)
                return self._damage(line_no)
            self._gpu = None
            return False
        self._after = True
        evidence = Evidence(source=self.source, line=line_no, text=body)
        values = [str(child) for child in tree.children]
        if tree.data == "gpu":
            self._gpu = NvlinkGpu(
                source=self.source,
                index=int(values[0]),
                product=" ".join(values[1].split()),
                uuid=values[2],
                evidence=evidence,
            )
            self._kept = False
            return True
        gpu = self._gpu
        assert gpu is not None
        if not self._kept:
            self.gpus.append(gpu)
            self._kept = True
        if tree.data == "all_inactive":
            gpu.all_inactive = evidence
            return True
        if tree.data == "link":
            if any(link.link == int(values[0]) for link in gpu.links):
                # a GPU's links again from one of its numbers: the next GPU's, its line lost; read as the
                # first GPU's, they would give it twice its links
                self._gpu = None
                self._orphan(line_no)
                return True
            active = not values[1].startswith("<")
            gpu.links.append(
                NvlinkLink(link=int(values[0]), speed=float(values[1]) if active else None, evidence=evidence)
            )
        return True

    def _damage(self, line_no: int) -> bool:
        assert self._gpu is not None
        self._damaged.append((line_no, self._gpu.index))
        self._after = True
        return True

    def _orphan(self, line_no: int) -> None:
        if self._in_orphans:
            self._orphans[-1][1] += 1
        else:
            self._orphans.append([line_no, 1])
            self._in_orphans = True
        self._after = True
