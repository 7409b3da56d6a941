"""Start-up of a fit: what importing the anonymizer and running a small ``anonymize`` load.

scikit-learn (its base classes load ``scipy.stats``, ``scipy.sparse``, pandas and joblib: about 1.3 s of
CPU) and ``scipy.stats`` / ``scipy.optimize`` (the risk package's population models) are loaded only by
a step that uses them; matplotlib and Jinja2 only for an HTML page. Module sets in a fresh process, not
seconds (a loaded machine makes timings flaky; docs/architecture.md has the measured seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from expected import ROOT

#: modules a plain fit, its report and its risk section never need
NOT_LOADED = ("sklearn", "scipy.stats", "scipy.optimize", "joblib", "matplotlib", "jinja2")


def _loaded_after(code: str, cwd) -> list:
    """The modules of NOT_LOADED that a fresh interpreter holds after ``code``."""
    code += f"\nimport sys\nprint(sorted(m for m in {NOT_LOADED!r} if m in sys.modules))\n"
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return eval(r.stdout.strip().splitlines()[-1])


def test_importing_the_estimators_loads_neither_scikit_learn_nor_scipy(tmp_path):
    code = ("import sys\nimport gpuanon.anonymize, gpuanon.perturb, gpuanon.risk, gpuanon.cli\n"
            "from gpuanon import Mondrian, DISTPAB\n"
            "m = Mondrian(k=3, quasi_identifiers=['a']); m.set_params(k=4); assert m.get_params()['k'] == 4\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_a_small_anonymize_with_its_report_loads_no_scikit_learn_or_scipy_stats(tmp_path):
    """The whole command in one fresh process: read, fit, verify, metrics, the report with its risk
    section, the written table; then a DISTPAB fit of a frame."""
    rng = np.random.default_rng(0)
    n = 60
    pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.choice(list("abcdef"), n),
                  "sick": rng.choice(["yes", "no"], n)}).to_csv(tmp_path / "in.csv", index=False)
    code = ("from gpuanon.cli import main\n"
            "assert main(['anonymize', 'in.csv', '--qi', 'age,zip', '--sensitive', 'sick', '--k', '3', '--l', '2',"
            " '--out', 'out.csv', '--report', 'r.json', '-q']) == 0\n"
            "import pandas as pd\nfrom gpuanon import DISTPAB\n"
            "DISTPAB(random_state=0, backend='cpu').fit(pd.read_csv('in.csv')[['age']].astype(float))\n")
    assert _loaded_after(code, tmp_path) == []
    assert (tmp_path / "out.csv").exists() and (tmp_path / "r.json").exists()
    # a population model is a step that uses SciPy's statistics: it loads them then
    code = ("from gpuanon.cli import main\n"
            "assert main(['anonymize', 'in.csv', '--qi', 'age,zip', '--k', '3', '--report', 'r2.json',"
            " '--population', '1000', '-q']) == 0\n")
    assert "scipy.stats" in _loaded_after(code, tmp_path)


def test_a_small_anonymize_loads_no_scipy_special(tmp_path):
    """A small table's metrics take their logarithms from ``math.log`` (the same bits as SciPy's,
    tests/test_metrics_speed.py): ``scipy.special`` (about 0.4 s of start-up) is not imported."""
    rng = np.random.default_rng(0)
    n = 60
    pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.choice(list("abcdef"), n),
                  "sick": rng.choice(["yes", "no"], n)}).to_csv(tmp_path / "in.csv", index=False)
    code = ("from gpuanon.cli import main\n"
            "assert main(['anonymize', 'in.csv', '--qi', 'age,zip', '--sensitive', 'sick', '--target', 'sick',"
            " '--k', '3', '--out', 'out.csv', '--report', 'r.json', '-q']) == 0\n"
            "import sys\nprint(sorted(m for m in sys.modules if m.startswith('scipy')))\n")
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
