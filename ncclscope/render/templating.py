"""HTML pages from the Jinja2 templates in render/templates/, every value escaped unless it is Markup.

Escaping is the default, so a log line holding `<script>` shows as text however a template is edited; a
value is escaped with `html.escape` (quotes too), the entities the pages have always had. Templates are
written one element a line and indented for people; the loader joins the lines, so a page is as compact
as it was built by hand, and `{{ nl }}` writes a line break where the page has one.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, Environment, StrictUndefined, TemplateNotFound
from markupsafe import Markup

TEMPLATES = Path(__file__).resolve().parent / "templates"
_LINE_BREAK = re.compile(r"\n[ \t]*")


class _JoinedLines(BaseLoader):
    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        path = TEMPLATES / template
        if not path.is_file():
            raise TemplateNotFound(template)
        return _LINE_BREAK.sub("", path.read_text(encoding="utf-8")), str(path), lambda: True


def escaped(value: object) -> Markup:
    """A value as the page shows it: Markup as it is, anything else escaped (None as nothing)."""
    if hasattr(value, "__html__"):
        return Markup(value)
    return Markup(html.escape("" if value is None else str(value), quote=True))


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=_JoinedLines(), autoescape=True, finalize=escaped, undefined=StrictUndefined)
    env.globals["nl"] = Markup("\n")
    return env


def render_page(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)
