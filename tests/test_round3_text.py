"""Category text as read (issue "Round three", item 5): a leading or trailing blank is part of a QI's or a
pass-through column's text in every output format; only ``True`` / ``False`` are booleans (``true`` /
``FALSE`` stay the text written); a missing value inside an automatic hierarchy's group label is ``\\N``,
as in a set cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon.table.cells import split_set_text
from gpuanon.cli import main


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "cpu")


@pytest.fixture()
def blanks(tmp_path):
    """200 rows: sex with ' female' beside 'female', flags spelled true / false and TRUE / FALSE,
    a pass-through note with ' lead' and 'lead '."""
    rng = np.random.default_rng(0)
    n = 200
    df = pd.DataFrame({"age": rng.integers(20, 60, n), "sex": rng.choice([" female", "female", "male "], n),
                       "flag": rng.choice(["true", "false"], n), "loud": rng.choice(["TRUE", "FALSE"], n),
                       "note": rng.choice([" lead", "lead ", "x"], n)})
    p = tmp_path / "t.csv"
    df.to_csv(p, index=False)
    return p, df


def _read(path):
    return (pd.read_parquet(path) if str(path).endswith(".parquet")
            else pd.read_csv(path, dtype=str, keep_default_na=False))


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_blanks_and_spellings_kept(blanks, tmp_path, ext, capsys):
    src, df = blanks
    out = tmp_path / f"o.{ext}"
    assert main(["anonymize", str(src), "--qi", "age,sex,flag,loud", "--k", "5", "--out", str(out), "-q"]) == 0
    got = _read(out)
    assert got["note"].astype(str).tolist() == df["note"].tolist()  # pass-through, rows in order
    for c in ("sex", "flag", "loud"):
        members = {v for cell in got[c].astype(str) for v in split_set_text(cell)}
        assert members <= set(df[c]), (c, members)  # every published value is a value of the file
        # every row's value is in its published cell: ' female' is never published as 'female'
        assert all(v in split_set_text(cell) for v, cell in zip(df[c], got[c].astype(str))), c
    assert {" female", "female"} <= {v for cell in got["sex"].astype(str) for v in split_set_text(cell)}


def test_only_True_False_are_booleans(tmp_path):
    from gpuanon.datasets import load_table

    p = tmp_path / "b.csv"
    p.write_text("a,b,c\nTrue,true,TRUE\nFalse,false,FALSE\n")
    got = load_table(p)
    assert got["a"].dtype == bool and got["a"].tolist() == [True, False]
    assert got["b"].tolist() == ["true", "false"] and got["c"].tolist() == ["TRUE", "FALSE"]


def test_missing_value_in_a_hierarchy_label_is_backslash_N(tmp_path):
    from gpuanon.hierarchy import frequency_hierarchy

    rng = np.random.default_rng(1)
    n = 300
    df = pd.DataFrame({"age": rng.integers(20, 60, n), "edu": rng.choice(["a", "b", "c", "Unknown", None], n),
                       "inc": rng.choice(["<=50K", ">50K"], n)})
    h = frequency_hierarchy(df["edu"], df["inc"], rho=50)
    groups = [lab for lab in h.labels[h.n_leaves:] if lab != "*"]
    assert groups and all("NaN" not in g for g in groups)
    assert any(None in split_set_text(g) for g in groups)
    src, out = tmp_path / "h.csv", tmp_path / "o.csv"
    df.to_csv(src, index=False)
    assert main(["anonymize", str(src), "--qi", "edu", "--k", "100", "--target", "inc", "--hierarchies", "auto",
                 "--rho", "50", "--out", str(out), "-q"]) == 0
    cells = pd.read_csv(out, dtype=str, keep_default_na=False)["edu"]
    assert not cells.str.contains("NaN").any()
    read = [split_set_text(c) for c in cells]
    assert all((v if isinstance(v, str) else None) in r for v, r in zip(df["edu"], read))
