r"""Regenerate tests/data/suda_sdcmicro.json.gz: SUDA2 / DIS-SUDA as sdcMicro computes them.

sdcMicro 5.8.1 (github.com/sdcTools/sdcMicro, commit cf32510) is not packaged for Debian; its SUDA2
code alone is compiled against Rcpp (Debian's r-base-core 4.2.2 and r-cran-rcpp) and called by
tests/data/suda2_sdc.R as sdcMicro's suda2() calls it:

    cp sdcMicro/src/Framework.h sdcMicro/src/Suda2.h .
    printf '#include <Rcpp.h>\n#include <malloc.h>\n#include "Framework.h"\n#include "Suda2.h"\n' > suda2_only.cpp
    PKG_CPPFLAGS=-I/usr/lib/R/site-library/Rcpp/include R CMD SHLIB suda2_only.cpp
    python tests/data/make_suda_sdcmicro.py $PWD/suda2_only.so

Cases: seeded random tables (3-7 QIs, small alphabets, some with missing cells) and the bundled
Adult table with its 9 categorical columns plus age (M = 10).
"""

from __future__ import annotations

import gzip
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd

from gpuanon.datasets.bundled import load_adult

ADULT_QIS = ["age", "workclass", "education", "marital-status", "occupation", "relationship",
             "race", "gender", "native-country", "income"]


def cases():
    rng = np.random.default_rng(2026)
    specs = [(8, 3, 2, 0.0), (12, 4, 3, 0.0), (20, 4, 3, 0.1), (30, 5, 3, 0.0), (40, 5, 2, 0.1),
             (60, 6, 3, 0.0), (100, 6, 4, 0.05), (150, 7, 3, 0.0), (200, 5, 5, 0.1), (300, 7, 2, 0.0)]
    for i, (n, m, a, miss) in enumerate(specs):
        cols = {}
        for c in range(m):
            v = rng.integers(1, a + 1 + (c % 2), size=n).astype(float)
            v[rng.random(n) < miss] = np.nan
            cols[f"v{c}"] = v
        yield f"random{i}_n{n}_m{m}", pd.DataFrame(cols), [0.01, 0.1][i % 2]
    adult = load_adult()[ADULT_QIS]
    codes = pd.DataFrame({q: pd.factorize(adult[q])[0] + 1 for q in ADULT_QIS})
    yield "adult_m10", codes, 0.01


def main(so_file: str) -> None:
    script = str(pathlib.Path(__file__).with_name("suda2_sdc.R"))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, frame, f in cases():
            src, dst = pathlib.Path(tmp, name + ".csv"), str(pathlib.Path(tmp, name))
            frame.to_csv(src, index=False, na_rep="")
            subprocess.run(["Rscript", script, so_file, str(src), dst, repr(f)], check=True)
            res = pd.read_csv(dst + ".rows.csv")
            con = pd.read_csv(dst + ".contrib.csv")
            bands = pd.read_csv(dst + ".bands.csv")
            cols = {c: [None if pd.isna(v) else int(v) for v in frame[c]] for c in frame.columns}
            out.append({"name": name, "fraction": f, "columns": cols,
                        "score": [int(s) if float(s).is_integer() else float(s) for s in res["score"]],
                        "dis": [float(f"{d:.9g}") for d in res["dis"]],
                        "contribution": [float(v) for v in con["contribution"]],
                        "bands": [int(v) for v in bands["count"]]})
    doc = {"source": "sdcMicro 5.8.1 (commit cf3251017482), src/Suda2.h called as suda2() calls it "
                     "(original_scores = TRUE), R 4.2.2, Rcpp 1.0.10", "cases": out}
    path = pathlib.Path(__file__).with_name("suda_sdcmicro.json.gz")
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1])
