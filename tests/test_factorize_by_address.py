"""gpuanon.table.values.factorize: the codes and distinct values of ``pd.factorize``, checked
against it on object columns of shared and of distinct objects, missing values of several kinds,
mixed types, and a column of mostly distinct objects (the direct route)."""

import numpy as np
import pandas as pd
import pytest

from gpuanon.table.values import BY_ADDRESS_MIN_ROWS, factorize


def _column(rng, n, shared: bool):
    pool = ["a", "b", "ccc", "a" * 40, "é", None, np.nan, 1, 1.0, 2.5, True, pd.NA, "1"]
    arr = np.array([pool[i] for i in rng.integers(0, len(pool), n)], dtype=object)
    if not shared:  # a tenth of the rows: equal values as objects of their own (text built per row)
        for r in np.flatnonzero(rng.random(n) < 0.1):
            arr[r] = "".join(["x", str(r % 7)])
    return arr


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("sentinel", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_as_pandas(shared, sentinel, seed):
    rng = np.random.default_rng(seed)
    arr = _column(rng, 3 * BY_ADDRESS_MIN_ROWS, shared)
    for values in (arr, pd.Series(arr)):
        want_c, want_u = pd.factorize(values, sort=False, use_na_sentinel=sentinel)
        got_c, got_u = factorize(values, use_na_sentinel=sentinel)
        assert got_c.dtype == want_c.dtype
        np.testing.assert_array_equal(got_c, want_c)
        assert [type(v) for v in got_u] == [type(v) for v in want_u]
        assert pd.Series(list(got_u), dtype=object).equals(pd.Series(list(want_u), dtype=object))


def test_first_missing_decides_position():
    # the first missing value comes after two others: its code is 2 when kept (use_na_sentinel=False)
    base = np.array(["b", "a", None, "b", np.nan, "c"], dtype=object)
    arr = np.concatenate([base] * (BY_ADDRESS_MIN_ROWS // 6 + 1))
    codes, uniq = factorize(arr, use_na_sentinel=False)
    assert codes[:6].tolist() == [0, 1, 2, 0, 2, 3]
    assert uniq[:2].tolist() == ["b", "a"] and uniq[3] == "c" and pd.isna(uniq[2])
    codes, uniq = factorize(arr, use_na_sentinel=True)
    assert codes[:6].tolist() == [0, 1, -1, 0, -1, 2] and uniq.tolist() == ["b", "a", "c"]


def test_mostly_distinct_and_small_columns():
    arr = np.array([f"id{i}" for i in range(2 * BY_ADDRESS_MIN_ROWS)], dtype=object)
    codes, uniq = factorize(arr)
    assert codes.tolist() == list(range(arr.shape[0])) and uniq.tolist() == arr.tolist()
    codes, uniq = factorize(np.array(["q", "p", "q"], dtype=object))
    assert codes.tolist() == [0, 1, 0] and uniq.tolist() == ["q", "p"]
