"""Order-preserving uint32 keys of kernels.keys: order, equality, exact decoding, missing values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kernels.keys import MISSING, decode_float32_keys, decode_keys, float32_keys, rank_keys

F32 = hnp.arrays(np.float32, st.integers(1, 200),
                 elements=st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True))
F64 = hnp.arrays(np.float64, st.integers(1, 200),
                 elements=st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                    st.sampled_from([0.0, -0.0, 1.0, -1.0, np.nan])))


def _check_order(x: np.ndarray, keys: np.ndarray):
    """Keys compare exactly as the non-missing values do (all pairs)."""
    ok = ~np.isnan(x)
    v, kk = x[ok].astype(np.float64), keys[ok].astype(np.int64)
    assert np.array_equal(v[:, None] < v[None, :], kk[:, None] < kk[None, :])
    assert np.array_equal(v[:, None] == v[None, :], kk[:, None] == kk[None, :])


# ------------------------------------------------------------------------------- float32 keys


@settings(max_examples=200, deadline=None)
@given(F32)
def test_float32_keys_order_and_inverse(x):
    keys = float32_keys(x)
    assert keys.dtype == np.uint32 and keys.shape == x.shape
    nan = np.isnan(x)
    assert (keys[nan] == MISSING).all()
    assert (keys[~nan] < MISSING).all()  # every real key is below MISSING
    _check_order(x, keys)
    dec = decode_float32_keys(keys[~nan])
    assert dec.dtype == np.float64
    assert np.array_equal(dec, x[~nan].astype(np.float64))  # exact; -0.0 == +0.0


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # signalling NaNs
def test_float32_keys_random_bit_patterns():
    """Every float32 bit pattern class: normals, subnormals, zeros, infinities, NaN payloads."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=20_000, dtype=np.uint64).astype(np.uint32)
    extra = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                      0xFFFFFFFF, 0x7FFFFFFF, 0x00000001, 0x80000001, 0x7F7FFFFF, 0xFF7FFFFF],
                     dtype=np.uint32)
    x = np.concatenate([bits, extra]).view(np.float32)
    keys = float32_keys(x)
    nan = np.isnan(x)
    assert (keys[nan] == MISSING).all() and (keys[~nan] < MISSING).all()
    # sorting by key sorts by value, and decoding is exact
    real = x[~nan]
    order = np.argsort(keys[~nan], kind="stable")
    assert (np.diff(real[order].astype(np.float64)) >= 0).all()
    assert np.array_equal(decode_float32_keys(keys[~nan]), real.astype(np.float64))


def test_float32_keys_signed_zero_and_infinities():
    x = np.array([-np.inf, -1.0, -0.0, 0.0, 1e-45, 1.0, np.inf, np.nan], dtype=np.float32)
    keys = float32_keys(x)
    assert keys[2] == keys[3]  # -0.0 and +0.0 are one value
    assert (np.diff(keys[:7].astype(np.int64)) >= 0).all()
    assert (np.diff(keys[[0, 1, 3, 4, 5, 6]].astype(np.int64)) > 0).all()
    assert keys[7] == MISSING
    dec = decode_float32_keys(keys[:7])
    assert np.array_equal(dec, x[:7].astype(np.float64))
    assert not np.signbit(dec[2])  # -0.0 decodes as +0.0
    # decode_keys dispatches on 'f32'
    assert np.array_equal(decode_keys(keys[:7], "f32"), dec)


# ---------------------------------------------------------------------------------- rank keys


@settings(max_examples=200, deadline=None)
@given(F64)
def test_rank_keys_order_inverse_and_missing(x):
    keys, uniq = rank_keys(x)
    assert keys.dtype == np.uint32 and keys.shape == x.shape
    nan = np.isnan(x)
    assert (keys[nan] == MISSING).all()
    assert not np.isnan(uniq).any()
    assert (np.diff(uniq) > 0).all()  # sorted, distinct
    assert len(uniq) == len(np.unique(x[~nan]))
    # dense ranks: 0 .. len(uniq) - 1
    if (~nan).any():
        assert set(np.unique(keys[~nan]).tolist()) == set(range(len(uniq)))
    _check_order(x, keys)
    assert np.array_equal(decode_keys(keys[~nan], uniq), x[~nan])  # exact


def test_rank_keys_with_nan_example():
    x = np.array([3.5, np.nan, -2.0, 3.5, -0.0, 0.0, np.nan, np.inf])
    keys, uniq = rank_keys(x)
    assert uniq.tolist() == [-2.0, 0.0, 3.5, np.inf]
    assert keys.tolist() == [2, int(MISSING), 0, 2, 1, 1, int(MISSING), 3]


def test_rank_keys_all_missing():
    keys, uniq = rank_keys(np.array([np.nan, np.nan]))
    assert (keys == MISSING).all()
    assert uniq.shape == (0,)


def test_decode_keys_of_all_missing_column():
    keys, uniq = rank_keys(np.array([np.nan, np.nan]))
    v = decode_keys(keys, uniq)  # the caller masks MISSING afterwards; it must not crash
    assert v.shape == (2,)


def _rank_keys_by_sort(x):
    """rank_keys as one sort of the values does it (the device's formulation, and the CPU's before
    the count of whole numbers): the reference of the CPU's count."""
    uniq, inv = np.unique(x, return_inverse=True)
    keys = inv.reshape(-1).astype(np.uint32)
    nan = np.isnan(x)
    keys[nan] = MISSING
    return keys, uniq[~np.isnan(uniq)]


WHOLE = hnp.arrays(np.float64, st.integers(1, 300),
                   elements=st.one_of(st.integers(-70_000, 70_000).map(float),
                                      st.sampled_from([0.0, -0.0, np.nan, 2.0**52, -(2.0**52), 4.4e-199, 0.5])))


@settings(max_examples=300, deadline=None)
@given(WHOLE)
def test_rank_keys_of_whole_numbers_as_the_sort_makes_them(x):
    """Whole numbers in a short range are ranked by a count on the CPU: the same keys and values
    (bits too: which zero a column of -0.0 and 0.0 holds) as the sort, whatever else is there."""
    keys, uniq = rank_keys(x)
    ref_keys, ref_uniq = _rank_keys_by_sort(x)
    assert keys.dtype == ref_keys.dtype and np.array_equal(keys, ref_keys)
    assert uniq.dtype == ref_uniq.dtype and np.array_equal(uniq.view(np.int64), ref_uniq.view(np.int64))


def test_rank_keys_counted_for_a_short_integer_range():
    x = np.array([40.0, 17.0, np.nan, 90.0, 17.0, 40.0])
    keys, uniq = rank_keys(x)
    assert uniq.tolist() == [17.0, 40.0, 90.0]
    assert keys.tolist() == [1, 0, int(MISSING), 2, 0, 1]
