"""Tables for people: the results as the thesis's tables 5.6 to 5.10 (models down, protections across)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..report.markdown import markdown_table
from .models import MODEL_NAMES, MODEL_TITLES


def score_table(results: pd.DataFrame, scores: Sequence[str] = ("accuracy", "f1_macro")) -> pd.DataFrame:
    """Models down, (protection, score) across: the shape of the thesis's tables 5.6 to 5.10."""
    t = results.pivot_table(index="model", columns="protection", values=list(scores), sort=False)
    t = t.swaplevel(0, 1, axis=1)
    prots = list(dict.fromkeys(results["protection"]))
    t = t.reindex(columns=pd.MultiIndex.from_product([prots, list(scores)]))
    order = [m for m in MODEL_NAMES if m in t.index]
    t = t.loc[order]
    t.index = [MODEL_TITLES[m] for m in order]
    return t


def markdown_scores(results: pd.DataFrame, scores: Sequence[str] = ("accuracy", "f1_macro")) -> str:
    """:func:`score_table` as a markdown table (3 decimals)."""
    t = score_table(results, scores)
    cells = t.map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
    cells.columns = [f"{p} {s}" for p, s in t.columns]
    return markdown_table(cells.rename_axis("model").reset_index())
