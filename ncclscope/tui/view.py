"""What every screen of the TUI is given once parsing and analysis are done."""

from __future__ import annotations

from dataclasses import dataclass, field

from ncclscope.model import Analysis, Case, Finding


@dataclass
class CaseView:
    """The analysed Case, and where each input's lines can be read again (for the raw log)."""

    analysis: Analysis
    # Source name as it appears in Evidence.source -> a plain file whose lines are those of the input
    # (stdin and .gz inputs are spooled to temporary files; bundle members are unpacked).
    files: dict[str, str] = field(default_factory=dict)

    @property
    def case(self) -> Case:
        return self.analysis.case

    def findings_with_prefix(self, *prefixes: str) -> list[Finding]:
        """Findings whose code starts with one of `prefixes` (e.g. "TOPO", "NET00")."""
        return [f for f in self.analysis.findings if f.code.startswith(prefixes)]
