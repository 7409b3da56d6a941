"""Markdown tables, made by ``pandas.DataFrame.to_markdown`` (tabulate) in one layout for the project:
cells as given (no padding to the column width), ``| --- |`` under the header.

>>> import pandas as pd
>>> print(markdown_table(pd.DataFrame({"run": ["k=3", "k=5"], "loss": ["1.5", ""]})), end="")
| run | loss |
| --- | --- |
| k=3 | 1.5 |
| k=5 |  |
"""

from __future__ import annotations


def _rule(colwidths, colaligns) -> str:
    return "| " + " | ".join("---" for _ in colwidths) + " |"


def _format():
    from tabulate import DataRow, TableFormat  # noqa: PLC0415

    row = DataRow("|", "|", "|")
    return TableFormat(lineabove=None, linebelowheader=_rule, linebetweenrows=None, linebelow=None,
                       headerrow=row, datarow=row, padding=1, with_header_hide=None)


def markdown_table(table) -> str:
    """A GitHub markdown table of ``table`` (a DataFrame of cell texts; its column names are the header),
    one line per row, ending with a newline. Format numbers before: cells are written as they are."""
    text = table.astype(str).to_markdown(index=False, tablefmt=_format(), stralign=None, numalign=None,
                                         disable_numparse=True)
    return text + "\n"
