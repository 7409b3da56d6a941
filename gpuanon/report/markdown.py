"""Markdown tables, made by ``pandas.DataFrame.to_markdown`` (tabulate) in one layout for the project:
cells as given (no padding to the column width), ``| --- |`` under the header (``|---|`` when compact).

>>> import pandas as pd
>>> print(markdown_table(pd.DataFrame({"run": ["k=3", "k=5"], "loss": ["1.5", ""]})), end="")
| run | loss |
| --- | --- |
| k=3 | 1.5 |
| k=5 |  |
>>> markdown_table(pd.DataFrame({"run": ["k=3"]}), compact=True).splitlines()[1]
'|---|'
"""

from __future__ import annotations


def _rule(colwidths, colaligns) -> str:
    return "| " + " | ".join("---" for _ in colwidths) + " |"


def _compact_rule(colwidths, colaligns) -> str:
    return "|" + "|".join("---" for _ in colwidths) + "|"


def _format(compact: bool):
    from tabulate import DataRow, TableFormat  # noqa: PLC0415

    row = DataRow("|", "|", "|")
    return TableFormat(lineabove=None, linebelowheader=_compact_rule if compact else _rule, linebetweenrows=None,
                       linebelow=None, headerrow=row, datarow=row, padding=1, with_header_hide=None)


def markdown_table(table, compact: bool = False) -> str:
    """A GitHub markdown table of ``table`` (a DataFrame of cell texts; its column names are the header),
    one line per row, ending with a newline. Format numbers before: cells are written as they are.
    ``compact``: the rule under the header without spaces, ``|---|---|``."""
    text = table.astype(str).to_markdown(index=False, tablefmt=_format(compact), stralign=None, numalign=None,
                                         disable_numparse=True)
    return text + "\n"
