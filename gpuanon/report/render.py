"""Filling the packaged Jinja2 templates: the pages' style sheet, ``render_page``, and ``fmt``, the one
way a page shows a value (shared by the anonymization, evaluation, federated and risk pages)."""

from __future__ import annotations

from functools import cache
from importlib import resources

#: the pages' style sheet (templates/style.css)
_CSS = "\n" + resources.files(__package__).joinpath("templates", "style.css").read_text(encoding="utf-8")


@cache
def _env():
    import jinja2  # noqa: PLC0415

    return jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def render_page(template: str, **context) -> str:
    """One of the packaged templates (``templates/NAME``) filled with ``context`` (autoescaped); every page
    extends ``base.html``, which needs ``title``, ``json_summary`` and ``raw_json``."""
    from markupsafe import Markup  # noqa: PLC0415

    return _env().get_template(template).render(css=Markup(_CSS), **context)


def table_context(rows: list, cols: list) -> dict:
    """``rows`` (dicts) as a simple table for a template: the columns' names with spaces, each cell by :func:`fmt`."""
    return {"columns": [c.replace("_", " ") for c in cols], "rows": [[fmt(r.get(c)) for c in cols] for r in rows]}


def fmt(v) -> str:
    """A value as the pages show it: '–' for None, floats to 6 significant digits (large whole ones exactly)."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.0f}" if v.is_integer() and abs(v) >= 1e6 else f"{v:.6g}"
    return str(v)
