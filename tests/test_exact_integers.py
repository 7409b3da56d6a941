"""Integer QIs anywhere in int64 / uint64 are keyed, partitioned and published exactly.

A property test: random integer columns (values near the ends of the 64-bit ranges, near 2**53,
clustered so that float64 would merge neighbours), random k and output format. Every original
value must lie inside its published interval, read from the published text with this test's own
parser (Python ints, no float anywhere); the classes the test forms by grouping the published
QI columns must have at least k rows; ``gpuanon.release.verify`` and ``gpuanon.release.verify.cells_inside`` must
agree. On a float64 dictionary this fails (bounds rounded to the nearest float, and beyond 2**63
every bound written as -9223372036854775808).
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuanon import Mondrian
from gpuanon.errors import SchemaError
from gpuanon.release.verify import cells_inside, verify

I64 = (-(2**63), 2**63 - 1)
U64 = (0, 2**64 - 1)


def _bounds(text: str) -> tuple[int, int]:
    """The test's own reading of a published integer cell: ``v``, ``lo-hi`` or ``[lo, hi]``."""
    m = re.fullmatch(r"\[(-?\d+), (-?\d+)\]", text) or re.fullmatch(r"(-?\d+)-(-?\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    assert re.fullmatch(r"-?\d+", text), text
    return int(text), int(text)


@st.composite
def columns(draw):
    unsigned = draw(st.booleans())
    lo, hi = U64 if unsigned else I64
    n = draw(st.integers(6, 50))
    centre = draw(st.one_of(st.sampled_from([lo, hi, 2**53, -(2**53), 2**63 - 1, 0]),
                            st.integers(lo, hi)))
    spread = draw(st.sampled_from([3, 1000, 2**11, 2**40, 2**64]))
    offs = draw(st.lists(st.integers(-spread, spread), min_size=n, max_size=n))
    vals = [min(max(centre + o, lo), hi) for o in offs]
    return np.array(vals, dtype=np.uint64 if unsigned else np.int64)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=columns(), k=st.integers(2, 5), fmt=st.sampled_from(["range", "minmax"]), seed=st.integers(0, 99))
def test_every_original_integer_inside_its_published_interval(ids, k, fmt, seed):
    n = ids.shape[0]
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"acct": ids, "age": rng.integers(20, 25, n), "y": rng.integers(0, 2, n)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from a cast, nothing else either
        warnings.filterwarnings("ignore", message=".*looks like an identifier.*")
        out = Mondrian(k=k, quasi_identifiers=["acct", "age"], sensitive="y", output_format=fmt,
                       backend="cpu", progress=False).fit_transform(df)
    assert len(out) == n  # nothing suppressed: no value is missing
    if fmt == "range":
        bounds = [_bounds(t) for t in out["acct"].astype(str)]
        cols = ["acct", "age"]
    else:
        assert out["acct_min"].dtype == ids.dtype and out["acct_max"].dtype == ids.dtype
        bounds = list(zip((int(v) for v in out["acct_min"]), (int(v) for v in out["acct_max"])))
        cols = ["acct_min", "acct_max", "age_min", "age_max"]
    for v, (a, b) in zip(ids.tolist(), bounds):
        assert a <= v <= b, (v, a, b)
    sizes = out.groupby(cols, dropna=False).size()
    assert sizes.min() >= k
    assert verify(out, cols, "y", k=k).ok
    assert cells_inside(out, df, ["acct", "age"]) == {"acct": 0, "age": 0}


def test_bounds_beyond_2_63_are_exact_text():
    ids = np.array([2**64 - 1, 2**64 - 2, 2**64 - 5, 2**63 + 1, 2**63, 2**63 + 7], dtype=np.uint64)
    df = pd.DataFrame({"acct": ids, "y": [0, 1, 0, 1, 0, 1]})
    out = Mondrian(k=3, quasi_identifiers=["acct"], backend="cpu", progress=False).fit_transform(df)
    assert sorted(set(out["acct"].astype(str))) == ["18446744073709551611-18446744073709551615",
                                                     "9223372036854775808-9223372036854775815"]


def test_negative_bounds_in_brackets():
    ids = np.array([-(2**63), -(2**63) + 1, -(2**63) + 2, 2**62, 2**62 + 3, 2**62 + 4], dtype=np.int64)
    out = Mondrian(k=3, quasi_identifiers=["acct"], backend="cpu", progress=False).fit_transform(
        pd.DataFrame({"acct": ids}))
    assert sorted(set(out["acct"].astype(str))) == ["4611686018427387904-4611686018427387908",
                                                     "[-9223372036854775808, -9223372036854775806]"]


def test_missing_values_and_mean():
    ids = pd.array([2**60, 2**60 + 1, None, 2**60 + 5, None, 2**60 + 9, None, 2**60 + 10], dtype="Int64")
    df = pd.DataFrame({"acct": ids})
    m = Mondrian(k=2, quasi_identifiers=["acct"], output_format="minmax", backend="cpu", progress=False)
    out = m.fit_transform(df)
    assert str(out["acct_min"].dtype) == "Int64"  # a missing value: nullable, never float64
    assert cells_inside(out, df, ["acct"]) == {"acct": 0}
    mean = Mondrian(k=2, quasi_identifiers=["acct"], output_format="mean", backend="cpu",
                    progress=False).fit_transform(df)
    assert mean["acct"].isna().sum() == 3


def test_integers_beyond_64_bits_refused_with_the_fix():
    df = pd.DataFrame({"acct": pd.Series([2**70 + i for i in range(6)], dtype=object), "y": [0, 1] * 3})
    with pytest.raises(SchemaError, match=r"quasi-identifier 'acct'.*--categorical acct") as exc:
        Mondrian(k=2, quasi_identifiers=["acct"], numeric=["acct"], backend="cpu", progress=False).fit(df)
    assert "\n" not in str(exc.value)
    # declared categorical, the values are published as sets of their exact text
    out = Mondrian(k=3, quasi_identifiers=["acct"], categorical=["acct"], backend="cpu",
                   progress=False).fit_transform(df)
    assert all(str(2**70) in c or str(2**70 + 5) in c for c in out["acct"])


def test_cli_check_reads_bounds_exactly(tmp_path):
    """``gpuanon check --original`` compares integers exactly: a bound moved by one is caught."""
    ids = (10**17 + 7 * np.arange(40) + 3).astype(np.int64)
    df = pd.DataFrame({"acct": ids, "age": np.arange(40) % 7 + 20, "y": np.arange(40) % 2})
    src, out = tmp_path / "in.parquet", tmp_path / "out.csv"
    df.to_parquet(src)
    run = [sys.executable, "-W", "error", "-m", "gpuanon"]
    r = subprocess.run(run + ["anonymize", str(src), "--qi", "acct,age", "--k", "4", "--out", str(out), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ok = subprocess.run(run + ["check", str(out), "--qi", "acct,age", "--k", "4", "--original", str(src)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
    text = out.read_text()
    m = re.search(r'(^|[,"])(\d{18})-', text, re.M)  # the first interval's lower bound (quoted or not)
    first = m.group(2)
    (tmp_path / "bad.csv").write_text(text[:m.start(2)] + str(int(first) + 1) + text[m.end(2):])
    bad = subprocess.run(run + ["check", str(tmp_path / "bad.csv"), "--qi", "acct,age", "--k", "4",
                                "--original", str(src)], capture_output=True, text=True)
    assert bad.returncode == 1 and "outside the published cell" in bad.stdout, bad.stdout + bad.stderr


@pytest.mark.parametrize("fmt", ["range", "minmax", "mean"])
def test_device_double_same_as_cpu(fmt):
    """The GPU code path (on the strict CPU stand-in for CuPy, tests/cupy_double.py) gives the CPU's
    output, report and metrics for exact integer and date QIs, with no uncounted copy."""
    from test_device_double import run_both

    rng = np.random.default_rng(5)
    n = 400
    acct = pd.array(2**63 + rng.integers(0, 10**6, n).astype(np.uint64) * np.uint64(1000), dtype="UInt64")
    acct[rng.random(n) < 0.1] = pd.NA
    df = pd.DataFrame({"acct": acct, "age": rng.integers(20, 40, n),
                       "when": pd.Timestamp("2022-01-01") + pd.to_timedelta(rng.integers(0, 10**7, n), unit="s"),
                       "y": rng.integers(0, 3, n)})
    run_both(df, k=4, quasi_identifiers=["acct", "age", "when"], sensitive="y", output_format=fmt)


def test_same_partition_as_the_values_shifted_into_float_range():
    """Ranks and widths are those of the values: a column shifted by 2**62 (exact dictionary) is
    cut exactly as the unshifted one (float dictionary), with the same NCP."""
    rng = np.random.default_rng(11)
    x = rng.integers(0, 5000, 300)
    small = pd.DataFrame({"acct": x, "age": rng.integers(20, 60, 300), "y": rng.integers(0, 2, 300)})
    big = small.assign(acct=x + 2**62)
    ms, mb = (Mondrian(k=5, quasi_identifiers=["acct", "age"], sensitive="y", output_format="minmax",
                       backend="cpu", progress=False) for _ in range(2))
    os_, ob = ms.fit_transform(small), mb.fit_transform(big)
    assert mb.table_.columns[0].exact is not None and ms.table_.columns[0].exact is None
    np.testing.assert_array_equal(ms.labels_, mb.labels_)
    assert (ob["acct_min"].to_numpy() - 2**62 == os_["acct_min"].to_numpy()).all()
    assert mb.metrics_["ncp"] == ms.metrics_["ncp"]
