"""Tests of gpuanon.datasets: bundled Adult, synthetic HEPMASS, table reading, named datasets."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from gpuanon import datasets as ds
from gpuanon.datasets import (
    ADULT_QUASI_IDENTIFIERS,
    ADULT_TARGET,
    HEPMASS_FEATURES,
    get_dataset,
    load_adult,
    load_sklearn,
    load_table,
    make_hepmass,
)
from gpuanon.errors import GpuanonError, InputError

ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "gender", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
]
ADULT_INTS = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
              "hours-per-week"]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return load_adult()


# ---------------------------------------------------------------------------------- Adult


def test_adult_shape_and_columns(adult):
    assert adult.shape == (32561, 15)
    assert list(adult.columns) == ADULT_COLUMNS
    assert isinstance(adult.index, pd.RangeIndex)


def test_adult_dtypes(adult):
    for c in ADULT_COLUMNS:
        if c in ADULT_INTS:
            assert adult[c].dtype == np.int64, c
        else:
            assert adult[c].dtype == object, c
            assert all(type(v) is str for v in adult[c].head(200)), c


def test_adult_values(adult):
    assert not adult.isna().any().any()
    counts = adult["income"].value_counts().to_dict()
    assert counts == {"<=50K": 24720, ">50K": 7841}
    # no leading/trailing spaces; '?' is kept as a real category
    for c in adult.columns[adult.dtypes == object]:
        assert (adult[c] == adult[c].str.strip()).all(), c
    assert (adult["workclass"] == "?").sum() == 1836
    assert (adult["occupation"] == "?").sum() == 1843
    assert (adult["native-country"] == "?").sum() == 583
    first = adult.iloc[0]
    assert first["age"] == 39 and first["workclass"] == "State-gov"
    assert first["fnlwgt"] == 77516 and first["income"] == "<=50K"


def test_adult_constants():
    assert ADULT_TARGET == "income"
    assert ADULT_QUASI_IDENTIFIERS == [
        "age", "workclass", "education", "education-num", "marital-status", "occupation",
        "relationship", "race", "gender", "native-country",
    ]
    assert set(ADULT_QUASI_IDENTIFIERS) <= set(ADULT_COLUMNS)


def test_adult_fresh_copy(adult):
    a = load_adult()
    a.loc[0, "age"] = -1
    assert load_adult().loc[0, "age"] == 39


def test_adult_license_present():
    from importlib import resources

    text = (resources.files("gpuanon") / "data" / "ADULT_LICENSE.txt").read_text()
    assert "CC BY 4.0" in text and "UCI" in text and "mglearn" in text


# ---------------------------------------------------------------------------------- HEPMASS


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 70_001])
def test_hepmass_shape_dtypes_balance(n):
    df = make_hepmass(n, random_state=3)
    assert df.shape == (n, 29)
    assert list(df.columns) == HEPMASS_FEATURES + ["label"]
    assert HEPMASS_FEATURES == [f"f{i}" for i in range(28)]
    assert all(df[c].dtype == np.float32 for c in HEPMASS_FEATURES)
    assert df["label"].dtype == np.int8
    assert set(np.unique(df["label"])) <= {0, 1}
    ones = int(df["label"].sum())
    assert ones == n // 2
    assert abs((n - ones) - ones) <= 1
    assert np.isfinite(df[HEPMASS_FEATURES].to_numpy()).all()
    assert isinstance(df.index, pd.RangeIndex)


def test_hepmass_reproducible_and_seeded():
    a = make_hepmass(5000, random_state=11)
    b = make_hepmass(5000, random_state=11)
    pd.testing.assert_frame_equal(a, b)
    c = make_hepmass(5000, random_state=12)
    assert not np.array_equal(a[HEPMASS_FEATURES].to_numpy(), c[HEPMASS_FEATURES].to_numpy())
    assert not np.array_equal(a["label"].to_numpy(), c["label"].to_numpy())
    # numpy integer seeds work like Python ints
    pd.testing.assert_frame_equal(a, make_hepmass(np.int64(5000), random_state=np.int32(11)))


def test_hepmass_independent_of_chunk_rows():
    n = 3 * 65536 + 123  # several internal blocks plus a partial one
    ref = make_hepmass(n, random_state=5)
    for chunk_rows in (1, 65536, 100_000, 10**8):
        pd.testing.assert_frame_equal(make_hepmass(n, random_state=5, chunk_rows=chunk_rows),
                                      ref)


def test_hepmass_prefix_stable():
    # rows are generated in fixed blocks: a shorter frame is a prefix of a longer one
    # (whole blocks only: the partial last block is shuffled differently)
    long = make_hepmass(2 * 65536 + 10, random_state=2)
    short = make_hepmass(65536, random_state=2)
    pd.testing.assert_frame_equal(long.iloc[:65536], short)


def test_hepmass_mass_feature_discrete():
    df = make_hepmass(20_000, random_state=0)
    values = np.unique(df["f27"].to_numpy())
    assert len(values) <= 10
    assert set(values.tolist()) == {500.0, 750.0, 1000.0, 1250.0, 1500.0}
    # uniform for signal and background alike
    for lab in (0, 1):
        freq = df.loc[df["label"] == lab, "f27"].value_counts(normalize=True)
        assert (freq - 0.2).abs().max() < 0.03


def test_hepmass_has_signal_and_structure():
    df = make_hepmass(40_000, random_state=1)
    sig, bg = df[df["label"] == 1], df[df["label"] == 0]
    # mean shift on some features, none on angles
    assert sig["f0"].mean() - bg["f0"].mean() > 0.4
    assert abs(sig["f16"].mean() - bg["f16"].mean()) < 0.1
    # heavy-tailed positive momenta
    assert (df["f8"] > 0).all() and (df["f12"] >= 0).all()
    assert df["f8"].max() > 10 * df["f8"].median()
    # correlated features
    corr = np.corrcoef(df["f0"], df["f1"])[0, 1]
    assert abs(corr) > 0.2
    # mass-like features are positive and peak at the mass for signal
    assert (df[[f"f{i}" for i in range(22, 27)]] > 0).all().all()
    s1500 = sig[sig["f27"] == 1500.0]["f22"]
    assert abs(s1500.median() - 1.5) < 0.05


@pytest.mark.parametrize("bad", [0, -5, 2.5, "10", None, True, 1.0])
def test_hepmass_bad_n_rows(bad):
    with pytest.raises(ValueError, match="make_hepmass: n_rows must be a positive integer, got"):
        make_hepmass(bad)


def test_hepmass_bad_other_args():
    with pytest.raises(ValueError, match="chunk_rows"):
        make_hepmass(10, chunk_rows=0)
    with pytest.raises(ValueError, match="random_state"):
        make_hepmass(10, random_state=-1)
    with pytest.raises(ValueError, match="random_state"):
        make_hepmass(10, random_state=1.5)


# ---------------------------------------------------------------------------------- sklearn


def test_load_sklearn_unknown_name():
    with pytest.raises(InputError, match="breast_cancer"):
        load_sklearn("iris")


def test_load_sklearn_missing_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match="install scikit-learn"):
        load_sklearn("wine")


@pytest.mark.parametrize("name,shape", [("breast_cancer", (569, 31)), ("wine", (178, 14)),
                                        ("digits", (1797, 65))])
def test_load_sklearn(name, shape):
    pytest.importorskip("sklearn")
    df = load_sklearn(name)
    assert df.shape == shape
    assert df.columns[-1] == "target"
    frame, roles = get_dataset(name)
    assert roles == {"quasi_identifiers": list(df.columns[:-1]), "target": "target",
                     "sensitive": "target"}


# ---------------------------------------------------------------------------------- load_table


@pytest.fixture
def small_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "a": [1, 2, 3],
        "b": ["x", "y", "?"],
        "c": [0.5, np.nan, 2.25],
    })


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".CSV"])
def test_load_table_csv_roundtrip(tmp_path, small_frame, suffix):
    p = tmp_path / f"t{suffix}"
    small_frame.to_csv(p, index=False, compression="gzip" if suffix == ".csv.gz" else None)
    got = load_table(p)
    pd.testing.assert_frame_equal(got, small_frame)
    assert load_table(str(p)).equals(got)


def test_load_table_csv_spaces_and_empty_cells(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("a, b, c\n1, x, ?\n2, ,y\n")
    got = load_table(p)
    assert list(got.columns) == ["a", "b", "c"]
    assert got["b"].iloc[0] == " x" and got["c"].iloc[0] == " ?"  # text as read, its leading blank too
    assert pd.isna(got["b"].iloc[1])
    assert got["a"].dtype == np.int64


def test_load_table_tsv(tmp_path, small_frame):
    p = tmp_path / "t.tsv"
    small_frame.to_csv(p, index=False, sep="\t")
    pd.testing.assert_frame_equal(load_table(p), small_frame)


@pytest.mark.parametrize("suffix", [".parquet", ".pq"])
def test_load_table_parquet_roundtrip(tmp_path, small_frame, suffix):
    pytest.importorskip("pyarrow")
    p = tmp_path / f"t{suffix}"
    small_frame.to_parquet(p, index=False)
    pd.testing.assert_frame_equal(load_table(p), small_frame)


def test_load_table_bad_extension(tmp_path):
    p = tmp_path / "t.xlsx"
    p.write_text("whatever")
    with pytest.raises(InputError) as ei:
        load_table(p)
    msg = str(ei.value)
    assert str(p) in msg
    for ext in (".csv", ".csv.gz", ".tsv", ".parquet", ".pq"):
        assert ext in msg
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, GpuanonError)


def test_load_table_missing_file(tmp_path):
    p = tmp_path / "nope.csv"
    with pytest.raises(InputError, match=r"cannot read input file '.*nope\.csv': .*; check the path"):
        load_table(p)


def test_load_table_directory_and_corrupt(tmp_path):
    d = tmp_path / "dir.csv"
    d.mkdir()
    with pytest.raises(InputError, match="cannot read input file"):
        load_table(d)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"this is not parquet")
    with pytest.raises(InputError, match=r"cannot read input file .*: not a Parquet file, or a truncated one"):
        load_table(bad)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="cannot read input file"):
        load_table(empty)


# ---------------------------------------------------------------------------------- get_dataset


def test_get_dataset_adult():
    df, roles = get_dataset("adult")
    assert df.shape == (32561, 15)
    assert roles == {"quasi_identifiers": ADULT_QUASI_IDENTIFIERS, "target": "income",
                     "sensitive": "income"}
    roles["quasi_identifiers"].append("oops")  # a copy: the constant is untouched
    assert "oops" not in ds.ADULT_QUASI_IDENTIFIERS


def test_get_dataset_adult_rows_sample():
    df, _ = get_dataset("Adult", rows=100, seed=4)
    assert df.shape == (100, 15)
    pd.testing.assert_frame_equal(df, get_dataset("adult", rows=100, seed=4)[0])
    assert not df.equals(get_dataset("adult", rows=100, seed=5)[0])
    with pytest.raises(InputError, match="32561"):
        get_dataset("adult", rows=40_000)


def test_get_dataset_hepmass():
    df, roles = get_dataset("hepmass", rows=500, seed=7)
    assert df.shape == (500, 29)
    assert roles == {"quasi_identifiers": HEPMASS_FEATURES, "target": "label",
                     "sensitive": "label"}
    pd.testing.assert_frame_equal(df, make_hepmass(500, random_state=7))


def test_get_dataset_hepmass_default_rows(monkeypatch):
    seen = {}

    def fake(n_rows, random_state=0, chunk_rows=1_000_000):
        seen["n"] = n_rows
        return make_hepmass(10, random_state=random_state)

    monkeypatch.setattr(ds, "make_hepmass", fake)
    get_dataset("hepmass")
    assert seen["n"] == 1_000_000


def test_get_dataset_errors():
    with pytest.raises(InputError) as ei:
        get_dataset("mnist")
    for name in ("adult", "hepmass", "breast_cancer", "wine", "digits"):
        assert name in str(ei.value)
    with pytest.raises(InputError, match="rows"):
        get_dataset("hepmass", rows=0)


def test_datasets_package_by_job():
    """Bundled sets, the generator and table reading in their own modules; every name at gpuanon.datasets."""
    from gpuanon.datasets import bundled, hepmass, tables

    from expected import layout_problems

    assert layout_problems("gpuanon.datasets") == []
    for mod in (bundled, hepmass, tables):
        for name in mod.__all__:
            assert getattr(ds, name) is getattr(mod, name), name
            assert name in ds.__all__, name

