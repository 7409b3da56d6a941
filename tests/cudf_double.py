"""A strict CPU stand-in for the part of cuDF gpuanon calls (test only): device-resident frames.

``CudfDouble(dev)`` is a module-like object (``DataFrame``, ``Series``, ``CategoricalIndex``) whose
frames keep their columns "on the device" of a :class:`cupy_double.DeviceDouble`: a column's data
are reached only through the calls cuDF has that stay on the device (``to_cupy`` hands a device
array of the double, ``take`` with a device index gathers there) or through ``to_pandas`` /
``to_arrow`` / ``memory_usage`` (the copy to the host, which ``gpuanon.backend`` counts). Anything
else that would read the data on the host (``__array__``, ``.values``, ``.to_numpy()``, iteration,
an attribute cuDF lacks) raises, so a code path that quietly brings a device frame to the host fails
here as it would cost a copy on a GPU.

Install it with ``dev.cudf = CudfDouble(dev)`` on the device double given to
``gpuanon.backend.use_device_module``: ``gpuanon.backend.cudf_module()`` then returns it and
``is_device_frame`` recognises its frames. Make a device-resident input with
:func:`device_frame_of` (the upload is not counted: the frame starts on the device, as after
``cudf.read_parquet``).

The storage is a pandas object (host memory standing in for device memory): pandas semantics stand
in for cuDF's for the few calls emulated (``take``, ``where``, ``reset_index``, categorical
construction), which is what cuDF documents for them. Every emulated call is counted per stage in
``dev.stats.cudf_calls`` (cuDF's own kernels: not CuPy operations, so not in ``ops``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from cupy_double import DArray, DeviceDoubleError, _stage

_REAL_ATTRS = {  # what cuDF has and the double emulates (checked against the wheel by test_cudf_api)
    "DataFrame": {"columns", "dtypes", "memory_usage", "to_pandas", "to_arrow", "to_cupy", "take", "reset_index"},
    "Series": {"dtype", "name", "memory_usage", "to_pandas", "to_cupy", "take", "where", "reset_index", "isna",
               "astype", "cat"},
    "CategoricalAccessor": {"codes", "categories"},
    "Index": {"memory_usage", "to_pandas"},
}


def _count(dev, what: str) -> None:
    c = getattr(dev.stats, "cudf_calls", None)
    if c is None:
        c = dev.stats.cudf_calls = Counter()
    c[(_stage(), what)] += 1


def _host_index(idx):
    """A gather index given to ``take``: a device array of the double (no copy) or a host one."""
    if isinstance(idx, DArray):
        return idx._a
    if isinstance(idx, (np.ndarray, list, range)):
        return np.asarray(idx)
    raise DeviceDoubleError(f"take() with a {type(idx).__name__} index")


class _Obj:
    _kind = ""

    def __array__(self, *a, **k):
        raise DeviceDoubleError(f"implicit host conversion of a cuDF {self._kind}: use to_pandas() through "
                                "gpuanon.backend (a counted copy) or to_cupy()")

    def __iter__(self):
        raise DeviceDoubleError(f"iterating a cuDF {self._kind} copies it to the host")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise DeviceDoubleError(f"the cuDF double does not emulate {self._kind}.{name} (or it would read the "
                                "device data on the host)")


class Series(_Obj):
    """A cuDF Series of the double: ``Series(device array)``, or of a ``CategoricalIndex``."""

    _kind = "Series"

    def __init__(self, data=None, name=None, *, _host: pd.Series | None = None, _dev=None):
        self._dev = _dev if _dev is not None else _DEV[0]
        if _host is not None:
            self._s = _host
        elif isinstance(data, DArray):
            _count(self._dev, "Series(array)")
            self._s = pd.Series(data._a.copy(), name=name)
        elif isinstance(data, CategoricalIndex):
            _count(self._dev, "Series(CategoricalIndex)")
            self._s = pd.Series(data._c, name=name)
        else:
            raise DeviceDoubleError(f"Series({type(data).__name__}): the double builds Series from device arrays "
                                    "and categorical indexes only (a host array would be an uncounted upload)")

    def _new(self, s):
        return Series(_host=s, _dev=self._dev)

    dtype = property(lambda self: self._s.dtype)
    name = property(lambda self: self._s.name)

    def __len__(self):
        return len(self._s)

    def memory_usage(self, deep=False):
        return int(self._s.memory_usage(deep=deep, index=False))

    def to_pandas(self):
        _count(self._dev, "to_pandas")
        return self._s.copy()

    def to_cupy(self, dtype=None, copy=False, na_value=None):
        _count(self._dev, "to_cupy")
        if isinstance(self._s.dtype, pd.CategoricalDtype) or self._s.dtype == object:
            raise DeviceDoubleError("to_cupy() of a non-numeric column")
        if self._s.isna().to_numpy().any() and na_value is None:
            raise DeviceDoubleError("to_cupy() of a column with nulls needs na_value (cuDF refuses)")
        a = self._s.to_numpy(dtype=dtype, na_value=na_value)
        return DArray(np.array(a, copy=True))

    def take(self, indices):
        _count(self._dev, "take")
        return self._new(self._s.take(_host_index(indices)))

    def where(self, cond):
        _count(self._dev, "where")
        c = cond._s if isinstance(cond, Series) else cond
        return self._new(self._s.where(c))

    def isna(self):
        _count(self._dev, "isna")
        return self._new(self._s.isna())

    def astype(self, dtype):
        _count(self._dev, "astype")
        return self._new(self._s.astype(dtype))

    def reset_index(self, drop=False):
        return self._new(self._s.reset_index(drop=drop))

    def __ge__(self, other):
        _count(self._dev, ">=")
        return self._new(self._s >= other)

    @property
    def cat(self):
        """``Series.cat`` of a categorical column: its codes (null where missing, as cuDF gives them)
        and its categories, both on the device."""
        if not isinstance(self._s.dtype, pd.CategoricalDtype):
            raise DeviceDoubleError("Series.cat of a column that is not categorical")
        return _CatAccessor(self)


class _CatAccessor(_Obj):
    _kind = "CategoricalAccessor"

    def __init__(self, series: Series):
        self._series = series

    @property
    def codes(self):
        _count(self._series._dev, "cat.codes")
        c = pd.Series(self._series._s.cat.codes.to_numpy(), name=self._series.name).astype("Int64")
        return Series(_host=c.where(c >= 0), _dev=self._series._dev)  # -1 -> null

    @property
    def categories(self):
        return Index(self._series._s.cat.categories, self._series._dev)


class Index(_Obj):
    """A cuDF Index of the double (a categorical's categories): reached through ``to_pandas`` only."""

    _kind = "Index"

    def __init__(self, idx: pd.Index, dev):
        self._i, self._dev = idx, dev

    def __len__(self):
        return len(self._i)

    def memory_usage(self, deep=False):
        return int(self._i.memory_usage(deep=deep))

    def to_pandas(self):
        _count(self._dev, "to_pandas")
        return self._i.copy()


class CategoricalIndex(_Obj):
    """``cudf.CategoricalIndex.from_codes``: codes (a Series of the double, nulls kept) and host categories."""

    _kind = "CategoricalIndex"

    def __init__(self, c: pd.Categorical):
        self._c = c

    @classmethod
    def from_codes(cls, codes, categories, ordered=False):
        _count(_DEV[0], "CategoricalIndex.from_codes")
        s = codes._s if isinstance(codes, Series) else pd.Series(_host_index(codes))
        cats = pd.Index(categories, dtype=object)
        return cls(pd.Categorical.from_codes(s.fillna(-1).astype(np.int64).to_numpy(), categories=cats,
                                             ordered=ordered, validate=False))


class DataFrame(_Obj):
    """A cuDF DataFrame of the double, from a dict of Series of the double."""

    _kind = "DataFrame"

    def __init__(self, data=None, *, _host: pd.DataFrame | None = None, _dev=None):
        self._dev = _dev if _dev is not None else _DEV[0]
        if _host is not None:
            self._f = _host
            return
        if not isinstance(data, dict) or not all(isinstance(v, Series) for v in data.values()):
            raise DeviceDoubleError("DataFrame(...) of the double takes a dict of its Series (a host frame would be "
                                    "an uncounted upload: use gpuanon.backend.frame_to_device)")
        _count(self._dev, "DataFrame(dict)")
        self._f = pd.DataFrame({k: v._s.reset_index(drop=True) for k, v in data.items()}, copy=False)

    columns = property(lambda self: self._f.columns)
    dtypes = property(lambda self: self._f.dtypes)

    def __len__(self):
        return len(self._f)

    @property
    def shape(self):
        return self._f.shape

    def __getitem__(self, key):
        if isinstance(key, list):
            return DataFrame(_host=self._f[key], _dev=self._dev)
        return Series(_host=self._f[key], _dev=self._dev)

    def memory_usage(self, deep=False, index=True):
        return pd.Series(self._f.memory_usage(deep=deep, index=False))

    def to_pandas(self):
        _count(self._dev, "to_pandas")
        return self._f.copy()

    def to_arrow(self, preserve_index=None):
        import pyarrow as pa  # noqa: PLC0415

        _count(self._dev, "to_arrow")
        return pa.Table.from_pandas(self._f, preserve_index=preserve_index)

    def to_cupy(self, dtype=None, copy=False, na_value=None):
        _count(self._dev, "to_cupy")
        if self._f.isna().to_numpy().any() and na_value is None:
            raise DeviceDoubleError("to_cupy() of columns with nulls needs na_value (cuDF refuses)")
        return DArray(np.array(self._f.to_numpy(dtype=dtype, na_value=na_value), copy=True))

    def take(self, indices):
        _count(self._dev, "take")
        return DataFrame(_host=self._f.take(_host_index(indices)), _dev=self._dev)

    def reset_index(self, drop=False):
        return DataFrame(_host=self._f.reset_index(drop=drop), _dev=self._dev)


_DEV: list = [None]


class CudfDouble:
    """The module-like cuDF stand-in (see the module docstring)."""

    __name__ = "cudf_double"
    DataFrame = DataFrame
    Series = Series
    CategoricalIndex = CategoricalIndex

    def __init__(self, dev):
        self.dev = dev
        _DEV[0] = dev
        dev.stats.cudf_calls = Counter()

    def read_parquet(self, path):
        _count(self.dev, "read_parquet")
        return DataFrame(_host=pd.read_parquet(path), _dev=self.dev)

    def from_pandas(self, df):
        _count(self.dev, "from_pandas")
        if isinstance(df, pd.Series):
            return Series(_host=df.copy(), _dev=self.dev)
        return DataFrame(_host=df.copy(), _dev=self.dev)


def device_frame_of(df: pd.DataFrame, dev) -> DataFrame:
    """``df`` as a device-resident frame of the double (as after ``cudf.read_parquet``: nothing counted)."""
    return DataFrame(_host=df.reset_index(drop=True).copy(), _dev=dev)


def is_frame(obj) -> bool:
    return isinstance(obj, (DataFrame, Series))

