"""Categorical QIs whose values are not text (integers, floats, bools): every published cell is
text, a class of one value too, so Arrow writes the column as one string column (issue 20, F4:
Parquet output raised ``ArrowInvalid`` / ``ArrowTypeError`` on a mix of ``108`` and ``'108|114'``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from expected import run_cli
from gpuanon import Mondrian
from gpuanon.table.cells import split_set_text
from gpuanon.output.io import write_table
from gpuanon.release.verify import verify

CATS = {"code": [101, 108, 114, 120, 133], "rate": [0.5, 1.5, 2.25], "flag": [True, False]}


def _frame(n: int = 240, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(20, 70, n), "y": rng.integers(0, 3, n)})
    for c, values in CATS.items():
        df[c] = rng.choice(np.array(values), n)
    return df


def _assert_text_cells(out: pd.DataFrame, original: pd.DataFrame) -> None:
    """Every cell of the categorical QIs is a string naming values of the original column."""
    for c, values in CATS.items():
        cells = out[c].dropna().tolist()
        assert cells and all(isinstance(v, str) for v in cells), (c, {type(v) for v in cells})
        singles = [v for v in cells if "|" not in v]
        assert singles, f"{c}: no class of a single value, the case F4 is about"
        names = {str(v) for v in values}
        assert all(set(split_set_text(v)) <= names for v in cells), c
        # each row's cell covers its original value
        if len(out) == len(original):  # nothing suppressed: rows in input order
            assert all(str(o) in split_set_text(v) for o, v in zip(original[c], out[c], strict=True)), c


def test_estimator_publishes_text_for_every_categorical_cell(tmp_path):
    df = _frame()
    m = Mondrian(k=5, quasi_identifiers=["age", *CATS], categorical=list(CATS), sensitive="y",
                 backend="cpu", progress=False)
    out = m.fit_transform(df)
    _assert_text_cells(out, df)
    for name in ("o.parquet", "o.csv"):
        path = tmp_path / name
        write_table(out, path)
        back = pd.read_parquet(path) if name.endswith("parquet") else pd.read_csv(path, dtype=str)
        if name.endswith("parquet"):
            schema = pq.read_schema(path)
            for c in CATS:
                t = schema.field(c).type
                assert pa.types.is_dictionary(t) and pa.types.is_string(t.value_type) or pa.types.is_string(t), t
        _assert_text_cells(back, df)
        r = verify(back, ["age", *CATS], "y", k=5)
        assert r.ok and r.k >= 5, r.failures


def test_estimator_with_hierarchies_publishes_text_leaves():
    """Hierarchy nodes are text labels; a class of one value published its raw value beside them."""
    df = _frame(seed=1)
    out = Mondrian(k=4, quasi_identifiers=["age", *CATS], categorical=list(CATS), target="y",
                   hierarchies="auto", rho=25, backend="cpu", progress=False).fit_transform(df)
    for c in CATS:
        cells = out[c].dropna().tolist()
        assert all(isinstance(v, str) for v in cells), (c, {type(v) for v in cells})
        assert {str(v) for v in CATS[c]} & set(cells), f"{c}: no leaf cell, the case F4 is about"
    pa.Table.from_pandas(out)  # Arrow accepts every column


@pytest.mark.slow
@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_cli_integer_float_bool_categoricals_round_trip(tmp_path, ext):
    df = _frame()
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    out = tmp_path / f"o.{ext}"
    qi = "age," + ",".join(CATS)
    r = run_cli("anonymize", str(src), "--qi", qi, "--categorical", ",".join(CATS), "--sensitive", "y",
                "--k", "5", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    back = pd.read_parquet(out) if ext == "parquet" else pd.read_csv(out, dtype=str)
    assert len(back) == len(df)
    _assert_text_cells(back, df)
    chk = run_cli("check", str(out), "--qi", qi, "--sensitive", "y", "--k", "5", "--original", str(src),
                  cwd=tmp_path)
    assert chk.returncode == 0 and "OK" in chk.stdout, (chk.stdout, chk.stderr)
