"""Base of every model, and where each fact came from: evidence lines, inputs and what was not understood."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ncclscope.model.factories import new_dict, new_list

SourceKind = Literal[
    "nccl_log",
    "topology",
    "nccl_tests",
    "nccl_tests_json",
    "framework_log",
    "flight_recorder",
    "ras_status",
    "topology_xml",
    "graph_xml",
    "ibstat",
    "ibv_devinfo",
    "nvidia_smi_query",
    "nvidia_smi_nvlink",
    "p2p_matrix",
    "kernel_log",
    "lspci",
    "inspector",
    "param_dump",
    "nccl_diag",
    "show_gids",
]


class Record(BaseModel):
    """Base of the models here. Pydantic gives every instance a set of its own: the names of the fields
    its constructor was given (`model_fields_set`, read by `exclude_unset`). ncclscope never asks it,
    and in a Case of a 1024-rank job (76,000 models) those sets take 34 MB, more than the values: the
    instances of one class share one set, of all its field names (assigning a field adds nothing)."""

    # Schemas are built on a model's first use: a command uses a few of these classes (start-up, issue 11)
    model_config = ConfigDict(defer_build=True)

    _every_field: ClassVar[set[str]] = set()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._every_field = set(cls.model_fields)

    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", self._every_field)


class Evidence(Record):
    """One input line that shows a fact."""

    source: str = Field(description="Path of the input ('-' for stdin).")
    line: int = Field(
        description="1-based line number in that input (0: a record of a file that has no lines, a dump)."
    )
    text: str = Field(
        default="",
        description="The line as it was read (ANSI escapes, CR, terminal trailers and markdown autolinks removed).",
    )

    @property
    def where(self) -> str:
        """`path:line`, or the path alone for a record of a binary or JSON document."""
        return f"{self.source}:{self.line}" if self.line > 0 else self.source


class UnrecognizedLine(Record):
    line: int
    text: str = Field(description="The line's text, cut at 300 characters.")
    reason: str = Field(default="", description="Why it was not understood, when known.")


class Source(Record):
    """One input (file, stdin, member of a directory) and how much of it was understood."""

    path: str
    kinds: list[SourceKind] = Field(default_factory=new_list, description="What the input holds.")
    lines: int = Field(0, description="Physical lines read.")
    bytes: int = 0
    nccl_lines: int = Field(0, description="Lines holding at least one NCCL log record (or a bare NCCL message).")
    recognized: int = Field(0, description="NCCL lines whose records were all understood.")
    unrecognized_count: int = Field(0, description="NCCL lines with at least one record not understood.")
    unrecognized: list[UnrecognizedLine] = Field(
        default_factory=new_list, description="The first unrecognised NCCL lines (at most 50)."
    )
    cut_records: int = Field(
        0, description="Records cut right after their prefix by another writer (no message left to read)."
    )
    records_repeated: int = Field(
        0,
        description="INFO records (version, interfaces, NICs, communicators) that repeat an earlier record of "
        "their process word for word, the time aside (a restart loop, a collector's resend): read once, counted.",
    )
    topology_lines: int = 0
    nccl_tests_lines: int = 0
    framework_lines: int = Field(0, description="PyTorch/framework lines about NCCL (watchdog, NCCL errors) read.")
    kernel_lines: int = Field(0, description="Kernel log lines of the NVIDIA driver, NVSwitches and PCIe AER read.")
    framework_unrecognized: int = Field(
        0, description="Framework lines about NCCL that were not understood (listed in `unrecognized`)."
    )
    invalid_utf8_lines: int = Field(0, description="Lines that were not valid UTF-8 (decoded with replacement).")
    skipped_lines: int = Field(
        0,
        description="Lines of blocks read before anything was recognised that hold no word of any kind ncclscope"
        " reads (random text, other programs' output): counted, not parsed (parse/junk.py).",
    )
    rewrapped: str | None = Field(
        None,
        description="A paste a terminal hard-wrapped at a fixed width, its pieces joined back into the lines they"
        " continue (parse/rewrap.py): the width and how many pieces; a joined line has its first piece's number.",
    )
    families: dict[str, int] = Field(default_factory=new_dict, description="Count of NCCL records per message family.")
    problems: list[str] = Field(default_factory=new_list, description="Why this input was partly or wholly unusable.")
    truncated: list[str] = Field(
        default_factory=new_list,
        description="Why the input looks cut: it stops inside a listing or in a cut record, or lines were elided.",
    )
    ends_cut: bool = Field(False, description="The input stops inside a listing or in a cut record.")
    stopped: str | None = Field(
        None, description="What ended reading before the input's end (Ctrl-C, SIGTERM): the rest was never read."
    )
    usable: bool = True
