"""Tables shared by the device tests (``tests/test_device_double.py`` on the CuPy stand-in,
``tests/test_gpu.py`` on a GPU)."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the QIs of :func:`every_numeric_dtype`, and the sensitive column
NUMERIC_QIS, SENSITIVE = ["a", "x", "y", "m"], "sa"


def every_numeric_dtype(n: int, seed: int = 11) -> pd.DataFrame:
    """``n`` rows with an int32, a float32, a float64 and a nullable-integer QI (5 % missing) and a
    text sensitive column of three values."""
    rng = np.random.default_rng(seed)
    miss = pd.array(rng.integers(0, 40, n), dtype="Int64")
    miss[rng.random(n) < 0.05] = pd.NA
    return pd.DataFrame({"a": rng.integers(18, 90, n).astype(np.int32), "x": rng.normal(size=n).astype(np.float32),
                         "y": rng.normal(size=n).round(3), "m": miss,
                         "sa": rng.choice(np.array(["p", "q", "r"], dtype=object), n)})
