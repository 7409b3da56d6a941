"""Run anonymeter 1.1.0 (in its own environment) on CSV files and print its risks as JSON.

Called by ``bench/compare_anonymeter.py`` as ``ANONYMETER_PYTHON _anonymeter_runner.py SPEC.json``; reads
nothing of gpuanon."""

import json
import sys
import time
import warnings

import pandas as pd
from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator


def _risk(ev, **kw):
    r = ev.risk(**kw)
    res = ev.results()
    return {"value": r.value, "ci": list(r.ci), "attack_rate": res.attack_rate.value,
            "control_rate": None if res.control_rate is None else res.control_rate.value,
            "baseline_rate": res.baseline_rate.value, "n_success": float(res.n_success)}


def main():
    spec = json.load(open(sys.argv[1]))
    ori, syn, ctl = (pd.read_csv(spec[k]) for k in ("original", "release", "control"))
    n, seed, out = spec["n_attacks"], spec["seed"], {}
    warnings.simplefilter("ignore")
    for mode in ("univariate", "multivariate"):
        t = time.process_time()
        ev = SinglingOutEvaluator(ori=ori, syn=syn, control=ctl, n_attacks=n, n_cols=3, seed=seed).evaluate(mode=mode)
        out[f"singling_out_{mode}"] = {**_risk(ev), "queries": len(ev.queries()), "cpu_s": time.process_time() - t}
    t = time.process_time()
    aux = tuple(spec["aux"])
    ev = LinkabilityEvaluator(ori=ori, syn=syn, control=ctl, n_attacks=n, aux_cols=aux,
                              n_neighbors=spec["neighbours"]).evaluate(n_jobs=1)
    out["linkability"] = {**_risk(ev), "cpu_s": time.process_time() - t}
    t = time.process_time()
    cols = [c for c in ori.columns if c != spec["secret"]]
    ev = InferenceEvaluator(ori=ori, syn=syn, control=ctl, aux_cols=cols, secret=spec["secret"],
                            n_attacks=n).evaluate(n_jobs=1)
    out["inference"] = {**_risk(ev), "cpu_s": time.process_time() - t}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
