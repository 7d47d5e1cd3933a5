"""Command palette (ctrl+p) commands of the TUI: switch screens, jump to a finding, toggle the theme."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider


class PaletteCommand(NamedTuple):
    text: str
    help: str
    run: Callable[[], object]


class HasPaletteCommands(Protocol):
    def palette_commands(self) -> list[PaletteCommand]: ...


class NcclscopeCommands(Provider):
    """The app's own commands, listed by `palette_commands()` of the app."""

    def _commands(self) -> list[PaletteCommand]:
        app: HasPaletteCommands = self.app  # type: ignore[assignment]
        return app.palette_commands()

    async def discover(self) -> Hits:
        for command in self._commands():
            yield DiscoveryHit(command.text, command.run, help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._commands():
            score = matcher.match(command.text)
            if score > 0:
                yield Hit(score, matcher.highlight(command.text), command.run, help=command.help)
