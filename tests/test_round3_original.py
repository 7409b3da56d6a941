"""``--original`` checked (issue "Round three", item 3): a table that cannot be the one an anonymized table
was made from (fewer rows, a QI column missing, published classes that hold none of its rows) is refused
with one line, exit 2, nothing written; ``risk --original`` computes "before" from the original's own
rows (N = the original's rows / f, as ``gpuanon risk ORIGINAL`` and ARX take it)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from gpuanon.cli import main
from gpuanon.datasets import load_adult
from gpuanon.release.origin import origin_problem

QI = "age,education,gender"


@pytest.fixture(autouse=True)
def _cpu(monkeypatch):
    monkeypatch.setenv("GPUANON_BACKEND", "cpu")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The first 300 Adult rows, their anonymization (k = 5) in the three formats, another 100 rows."""
    d = tmp_path_factory.mktemp("orig")
    src = d / "a300.csv"
    load_adult().iloc[:300].to_csv(src, index=False)
    load_adult().iloc[1000:1100].to_csv(d / "other.csv", index=False)
    outs = {}
    for fmt in ("range", "minmax", "mean"):
        outs[fmt] = d / f"anon_{fmt}.csv"
        assert main(["anonymize", str(src), "--qi", QI, "--k", "5", "--format", fmt, "--out", str(outs[fmt]),
                     "-q"]) == 0
    return d, src, outs


def _refused(capsys, argv, *words, outputs=()):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("gpuanon: error:")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], lines[0]
    for o in outputs:
        assert not o.exists()
    return lines[0]


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_the_real_original_passes(tables, fmt, capsys):
    _, src, outs = tables
    assert main(["check", str(outs[fmt]), "--qi", QI, "--k", "5", "--original", str(src)]) == 0, capsys.readouterr()
    assert main(["risk", str(outs[fmt]), "--qi", QI, "--original", str(src), "-q"]) == 0


def test_fewer_rows_refused(tables, capsys):
    d, _, outs = tables
    rep = d / "r.json"
    _refused(capsys, ["check", outs["range"], "--qi", QI, "--k", "5", "--original", d / "other.csv", "--target",
                      "income", "--report", rep], "--original", "100 rows", "300", outputs=[rep])
    _refused(capsys, ["risk", outs["range"], "--qi", QI, "--original", d / "other.csv", "--report", rep],
             "--original", "100 rows", outputs=[rep])


def test_other_values_refused(tables, capsys, tmp_path):
    """300 rows, every age 40 years older: no published age interval holds most of them."""
    _, src, outs = tables
    other = tmp_path / "older.csv"
    pd.read_csv(src).assign(age=lambda f: f["age"] + 40).to_csv(other, index=False)
    rep = tmp_path / "r.json"
    for fmt in ("range", "minmax"):
        _refused(capsys, ["check", outs[fmt], "--qi", QI, "--k", "5", "--original", other, "--report", rep],
                 "--original", "published classes hold no row of it", outputs=[rep])
    _refused(capsys, ["risk", outs["range"], "--qi", QI, "--original", other, "--html", rep],
             "published classes hold no row of it", outputs=[rep])


def test_missing_qi_column_refused(tables, capsys, tmp_path):
    _, src, outs = tables
    other = tmp_path / "nogender.csv"
    pd.read_csv(src).drop(columns=["gender"]).to_csv(other, index=False)
    _refused(capsys, ["check", outs["range"], "--qi", QI, "--k", "5", "--original", other], "no column 'gender'")


def test_origin_problem_joint_against_brute_force():
    """The whole-array test against a loop over classes and original rows, on random small tables."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(5, 40))
        orig = pd.DataFrame({"a": rng.integers(0, 10, n), "b": rng.choice(["x", "y", "z"], n)})
        orig.loc[:2, "b"] = ["x", "y", "z"]  # every category present: a single unknown value reads as a label
        m = int(rng.integers(1, n + 1))
        lo = rng.integers(0, 10, m)
        hi = lo + rng.integers(0, 4, m)
        hi[0] = lo[0] + 1  # an interval: not a column of class means (single numbers, read as any value)
        sets = [rng.choice(["x", "y", "z", "x|y", "y|z"]) for _ in range(m)]
        out = pd.DataFrame({"a": [f"{a}-{b}" if a != b else str(a) for a, b in zip(lo, hi)], "b": sets})
        held = [any(lo_ <= r.a <= hi_ and r.b in s.split("|") for r in orig.itertuples())
                for lo_, hi_, s in zip(lo, hi, sets)]
        cls = out.drop_duplicates()
        expected_bad = len({(x, y) for (x, y), h in zip(zip(out["a"], out["b"]), held) if not h})
        got = origin_problem(out, orig, ["a", "b"])
        if expected_bad == 0:
            assert got is None
        else:
            assert got is not None and got.startswith(f"{expected_bad:,} of the {len(cls):,} published classes")


def test_risk_before_uses_the_originals_rows(tables, capsys, tmp_path):
    """10 rows published suppressed (``*``): "before" takes N = 300 / 0.01 = 30,000, as ``risk ORIGINAL``."""
    _, src, outs = tables
    out = pd.read_csv(outs["range"], dtype=str, keep_default_na=False)
    out.loc[:9, QI.split(",")] = "*"
    sup = tmp_path / "sup.csv"
    out.to_csv(sup, index=False)
    both, alone = tmp_path / "both.json", tmp_path / "alone.json"
    assert main(["risk", str(sup), "--qi", QI, "--original", str(src), "--sampling-fraction", "0.01",
                 "--report", str(both), "-q"]) == 0
    assert main(["risk", str(src), "--qi", QI, "--sampling-fraction", "0.01", "--report", str(alone), "-q"]) == 0
    b, a = json.loads(both.read_text()), json.loads(alone.read_text())
    assert b["risk"]["sample"]["n_suppressed"] == 10
    assert b["risk_original"]["population"]["population_size"] == 30_000
    assert b["risk_original"]["population"] == a["risk"]["population"]
    assert b["risk"]["population"]["population_size"] == 30_000  # "after": the same N, not its 290 rows / f


def test_origin_problem_column_by_column_above_the_budget(monkeypatch):
    """Above the pair budget each column is tested alone (binary search / set rows): against brute force."""
    import gpuanon.release.origin as origin

    monkeypatch.setattr(origin, "PAIR_BUDGET", 0)
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(5, 40))
        orig = pd.DataFrame({"a": rng.integers(0, 10, n).astype(float), "b": rng.choice(["x", "y", "z"], n)})
        orig.loc[0, "a"] = np.nan
        m = int(rng.integers(1, n + 1))
        lo = rng.integers(0, 12, m)
        hi = lo + rng.integers(0, 3, m)
        hi[0] = lo[0] + 1
        out = pd.DataFrame({"a": [f"{a}-{b}" for a, b in zip(lo, hi)], "b": rng.choice(["x", "y", "z"], m)})
        present = set(orig["b"])
        held = [any(a <= x <= b for x in orig["a"].dropna()) and s in present for a, b, s in zip(lo, hi, out["b"])]
        bad = len({(x, y) for x, y, h in zip(out["a"], out["b"], held) if not h})
        got = origin.origin_problem(out, orig, ["a", "b"])
        assert (got is None) == (bad == 0) and (got is None or got.startswith(f"{bad:,} of")), (got, bad)
