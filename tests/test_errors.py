"""Bad input gives gpuanon.SchemaError / PrivacyError with a message naming the problem."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuanon import GpuanonError, Mondrian, PrivacyError, SchemaError


@pytest.fixture
def df():
    return pd.DataFrame({
        "age": [23, 35, 47, 52, 61, 29, 33, 41],
        "city": ["Oslo", "Rome", "Oslo", "Lima", "Rome", "Lima", "Oslo", "Rome"],
        "code": ["1a", "2b", "3c", "4d", "5e", "6f", "7g", "8h"],
        "disease": ["flu", "hiv", "flu", "hiv", "flu", "hiv", "flu", "hiv"],
        "name": [f"p{i}" for i in range(8)],
    })


def _fit(df, **kw):
    kw.setdefault("quasi_identifiers", ["age", "city"])
    return Mondrian(backend="cpu", progress=False, **kw).fit_transform(df)


def test_unknown_quasi_identifier_suggests_a_name(df):
    with pytest.raises(SchemaError, match=r"quasi-identifier 'agee' is not a column; did you mean 'age'"):
        _fit(df, quasi_identifiers=["agee", "city"])


def test_unknown_column_without_close_match_lists_the_columns(df):
    with pytest.raises(SchemaError, match=r"'zzzzzz' is not a column; the columns are: age, city"):
        _fit(df, quasi_identifiers=["zzzzzz"])


@pytest.mark.parametrize("role,kw", [
    ("sensitive attribute", {"sensitive": "diseas"}),
    ("identifier", {"identifiers": ["nme"]}),
    ("target", {"target": "disease_"}),
    ("numeric column", {"numeric": ["agge"]}),
])
def test_unknown_column_in_other_roles(df, role, kw):
    with pytest.raises(SchemaError, match=rf"{role} '\w+' is not a column; did you mean"):
        _fit(df, **kw)


@pytest.mark.parametrize("k", [1, 0, -3, 2.5, True, "3", None])
def test_k_must_be_an_integer_at_least_2(df, k):
    with pytest.raises(SchemaError, match=r"k must be an integer >= 2"):
        _fit(df, k=k)


def test_k_larger_than_the_table(df):
    with pytest.raises(PrivacyError, match=r"k = 9 is larger than the table \(8 rows\)"):
        _fit(df, k=9)
    _fit(df, k=8)  # exactly the table size is allowed


def test_empty_table(df):
    with pytest.raises(SchemaError, match="empty"):
        _fit(df.iloc[:0])


def test_input_must_be_a_dataframe(df):
    with pytest.raises(SchemaError, match="DataFrame"):
        _fit(df.to_numpy())


def test_no_quasi_identifiers(df):
    with pytest.raises(SchemaError, match="no quasi-identifiers"):
        _fit(df, quasi_identifiers=[])


def test_non_numeric_column_declared_numeric(df):
    with pytest.raises(SchemaError, match=r"quasi-identifier 'code' is declared numeric but holds non-numeric "
                                          r"values such as '1a'"):
        _fit(df, quasi_identifiers=["age", "code"], numeric=["code"])


def test_numeric_strings_declared_numeric_are_accepted(df):
    d = df.assign(code=[str(v) for v in range(8)])
    out = _fit(d, quasi_identifiers=["age", "code"], numeric=["code"], output_format="minmax", k=2)
    assert "code_min" in out.columns


def test_declared_both_numeric_and_categorical(df):
    with pytest.raises(SchemaError, match="both numeric and categorical"):
        _fit(df, numeric=["age"], categorical=["age"])


@pytest.mark.parametrize("l", [3, 5])
def test_l_larger_than_distinct_sensitive_values(df, l):
    with pytest.raises(PrivacyError, match=rf"whole table fails l-diversity: sensitive attribute 'disease' has "
                                           rf"2 distinct value\(s\) \(l = {l}"):
        _fit(df, k=2, l=l, sensitive="disease")


def test_entropy_l_failing_on_the_whole_table(df):
    d = df.assign(disease=["flu"] * 7 + ["hiv"])  # entropy of (7/8, 1/8) < log 2
    with pytest.raises(PrivacyError, match="whole table"):
        _fit(d, k=2, l=2, l_kind="entropy", sensitive="disease")


@pytest.mark.parametrize("kw", [{"l": 2}, {"t": 0.3}])
def test_l_or_t_without_a_sensitive_column(df, kw):
    with pytest.raises(SchemaError, match="need a sensitive attribute"):
        _fit(df, k=2, **kw)


@pytest.mark.parametrize("kw,pattern", [
    ({"mode": "fast"}, r"mode 'fast' is not one of strict, relaxed"),
    ({"output_format": "json"}, r"format 'json' is not one of range, minmax, mean"),
    ({"t_distance": "hamming", "t": 0.2, "sensitive": "disease"}, r"t_distance 'hamming' is not one of equal, ordered, kl"),
    ({"l_kind": "weird", "l": 2, "sensitive": "disease"}, r"l_kind 'weird' is not one of distinct, entropy, recursive"),
    ({"l": 1, "sensitive": "disease"}, r"l = 1 is always met"),
    ({"l": -2, "sensitive": "disease"}, r"l must be an integer >= 0"),
    ({"t": 0, "sensitive": "disease"}, r"t must be a number in \(0, 1\]"),
    ({"t": 1.5, "sensitive": "disease"}, r"t must be a number in \(0, 1\]"),
    ({"t": "0.2", "sensitive": "disease"}, r"t must be a number"),
    ({"max_suppression": 2.0}, r"max_suppression must be a fraction in \[0, 1\]"),
    ({"max_suppression": -0.1}, r"max_suppression must be a fraction"),
])
def test_bad_parameters(df, kw, pattern):
    with pytest.raises(SchemaError, match=pattern):
        _fit(df, k=2, **kw)


def test_kl_allows_t_above_one(df):
    """KL is unbounded, so t = 1.5 is a valid threshold for it (the EMDs lie in [0, 1] and refuse it)."""
    m = Mondrian(k=2, t=1.5, t_distance="kl", sensitive="disease", quasi_identifiers=["age", "city"],
                 backend="cpu", progress=False)
    out = m.fit_transform(df)
    rep = m.report_
    assert rep["requested"]["t"] == 1.5 and rep["achieved"]["t_distance"] == "kl"
    assert rep["achieved"]["t"] is not None and 0 <= rep["achieved"]["t"] <= 1.5
    assert m.verification_.ok and len(out) + rep["n_suppressed"] == len(df)
    with pytest.raises(SchemaError, match=r"t must be a number in \(0, 1\]"):
        _fit(df, k=2, t=1.5, t_distance="equal", sensitive="disease")


@pytest.mark.parametrize("kw,pattern", [
    ({"quasi_identifiers": ["age", "age"]}, "listed twice"),
    ({"sensitive": "age"}, "sensitive attribute 'age' is also a quasi-identifier"),
    ({"identifiers": ["age"]}, "both an identifier and a quasi-identifier"),
    ({"identifiers": ["disease"], "sensitive": "disease"}, "also an identifier"),
])
def test_conflicting_roles(df, kw, pattern):
    with pytest.raises(SchemaError, match=pattern):
        _fit(df, k=2, **kw)


def test_every_row_suppressed(df):
    # two missing-value blocks of 4 rows each, k = 5: both fail on their own
    d = df.assign(age=[np.nan, 1.0, np.nan, 2.0, np.nan, 3.0, np.nan, 5.0])
    with pytest.raises(PrivacyError, match="every row would be suppressed"):
        _fit(d, k=5, max_suppression=1.0, quasi_identifiers=["age"])


def test_over_suppression_budget_names_the_cause(df):
    d = df.assign(age=[np.nan, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 5.0])  # one row alone in its block
    with pytest.raises(PrivacyError, match=r"1 row\(s\) .* over the budget max_suppression = 0.01.*missing"):
        _fit(d, k=2, quasi_identifiers=["age"])
    out = _fit(d, k=2, quasi_identifiers=["age"], max_suppression=0.2)
    assert len(out) == 7


def test_every_error_is_a_gpuanon_error():
    assert issubclass(SchemaError, GpuanonError) and issubclass(SchemaError, ValueError)
    assert issubclass(PrivacyError, GpuanonError)
