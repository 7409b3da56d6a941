"""The anonymize report's risk section, two ways, in one process on one fit (HEPMASS-shaped, k = 10,
minmax): ``risk_section`` on the input and output frames (the read-back computation; here with this
branch's grouping) and the fit's own classes (``anonymize.risk_classes``), alternated, CPU seconds
(``time.process_time``) and wall, and the two sections checked equal.

    python bench/bench_risk_section.py ROWS PAIRS
"""
import json, resource, sys, time, gc
from gpuanon import Mondrian
from gpuanon.datasets import get_dataset
from gpuanon.anonymize.risk_classes import fit_classes
from gpuanon.risk.report import risk_section, section_of_classes, differences
n, pairs = int(sys.argv[1]), int(sys.argv[2])
df, roles = get_dataset("hepmass", rows=n, seed=0)
qi = roles["quasi_identifiers"]
m = Mondrian(k=10, quasi_identifiers=qi, output_format="minmax", backend="cpu", progress=False)
t = time.perf_counter(); c = time.process_time()
out = m.fit_transform(df)
fit_wall, fit_cpu = time.perf_counter() - t, time.process_time() - c
def old():
    return risk_section(df, out, qi)
def new():
    b, a, cols = fit_classes(m.result_, df, "minmax")
    return section_of_classes(b, a, qi, cols)
rows = []
for i in range(pairs):
    order = (("old", old), ("new", new)) if i % 2 == 0 else (("new", new), ("old", old))
    res = {}
    for name, f in order:
        gc.collect()
        l = open("/proc/loadavg").read().split()[0]
        t = time.perf_counter(); c = time.process_time()
        r = f()
        res[name] = dict(wall=time.perf_counter() - t, cpu=time.process_time() - c, load=float(l), doc=r)
    assert differences(res["old"]["doc"], res["new"]["doc"]) == []
    rows.append({k: {x: round(v[x], 3) for x in ("wall", "cpu", "load")} for k, v in res.items()})
    print(json.dumps(rows[-1]), flush=True)
import statistics as st
print(json.dumps({"rows": n, "fit_transform_wall": round(fit_wall, 2), "fit_transform_cpu": round(fit_cpu, 2),
                  "median_cpu_ratio_new_over_old": round(st.median(r["new"]["cpu"] / r["old"]["cpu"] for r in rows), 4),
                  "median_wall_ratio_new_over_old": round(st.median(r["new"]["wall"] / r["old"]["wall"] for r in rows), 4),
                  "median_cpu_old": round(st.median(r["old"]["cpu"] for r in rows), 3),
                  "median_cpu_new": round(st.median(r["new"]["cpu"] for r in rows), 3),
                  "maxrss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
