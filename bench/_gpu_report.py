"""bench/gpu_check.py's tables: the targets of issues 20 and 23 and the Markdown summary."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gpu_attack import ATTACK_TARGETS, attack_figures, attack_measured  # noqa: E402
from _gpu_risk import RISK_TARGETS, risk_figures, risk_measured  # noqa: E402

#: (name, what is measured, limit in seconds); measured on the full sizes only
TARGETS = [("hepmass_10.5M_fit_transform_warm", "Mondrian 10.5M x 28 k=10 minmax, warm fit_transform", 1.0),
           ("hepmass_10.5M_partition_warm", "its partition stage, warm", 0.3),
           ("adult_k3_fit_transform_warm", "Mondrian Adult k=3, warm fit_transform", 0.05),
           ("distpab_10.5M_warm", "DISTPAB 10.5M x 28, 4 entities, copies included, warm", 1.0),
           ("cli_parquet_10.5M_warm", "gpuanon anonymize Parquet -> Parquet 10.5M (cuDF), report total, warm", 3.0),
           *RISK_TARGETS, *ATTACK_TARGETS]


def targets(parts: dict, small: bool, backend: str) -> list[dict]:
    def get(*path):
        cur = parts
        for k in path:
            cur = cur.get(k) if isinstance(cur, dict) else None
        return cur

    measured = {"hepmass_10.5M_fit_transform_warm": get("mondrian_hepmass_big", "warm", "fit_transform"),
                "hepmass_10.5M_partition_warm": get("mondrian_hepmass_big", "warm", "stages", "partition"),
                "adult_k3_fit_transform_warm": get("mondrian_adult", "warm_best") or get("mondrian_adult", "warm", "fit_transform"),
                "distpab_10.5M_warm": get("distpab", "warm", "seconds", "total"),
                "cli_parquet_10.5M_warm": get("cli", "warm", "seconds", "total"), **risk_measured(get),
                **attack_measured(get)}
    if get("cli", "cudf_present") is False:
        measured["cli_parquet_10.5M_warm"] = None
    out = []
    for name, what, limit in TARGETS:
        v = measured[name]
        note = ("" if v is None else "CPU run: the targets are for the GPU" if backend != "gpu"
                else "small run: not the target's size" if small and not name.startswith("adult") else "")
        out.append({"name": name, "measure": what, "target_s": limit, "measured_s": v,
                    "met": None if v is None or note else bool(v < limit), "note": note})
    return out


def markdown(doc: dict) -> str:
    env, parts = doc["environment"], doc["parts"]
    lines = [f"# gpu_check ({doc['mode']}, backend {doc['backend']})", "",
             "| item | value |", "| --- | --- |"]
    for k in ("device", "driver_version", "cuda_runtime_version", "nvrtc_version", "compute_capability"):
        lines.append(f"| {k} | {env.get('device_info', {}).get(k)} |")
    for k, v in env["versions"].items():
        lines.append(f"| {k} | {v} |")
    lines += [f"| cpu | {env['cpu_model']} ({env['cpu_count']} cores) |", f"| wall seconds | {doc['wall_seconds']} |",
              "", "## Parts", "", "| part | status | figures |", "| --- | --- | --- |"]
    for name, p in parts.items():
        status = "skipped" if "skipped" in p else "error" if "error" in p else "ok"
        lines.append(f"| {name} | {status} | {figures(name, p)} |")
    lines += ["", "## Targets", "", "| target | limit (s) | measured (s) | met |", "| --- | --- | --- | --- |"]
    for t in doc["targets"]:
        met = {True: "met", False: "not met", None: "not measured"}[t["met"]]
        lines.append(f"| {t['measure']} | {t['target_s']} | {t['measured_s']} | {met}{' (' + t['note'] + ')' if t['note'] else ''} |")
    return "\n".join(lines) + "\n"


def figures(name: str, p: dict) -> str:
    if "skipped" in p:
        return p["skipped"]
    if "error" in p:
        kept = f" (kept: {p['partial']})" if p.get("partial") else ""
        return (p["error"] + kept).replace("|", "/")[:300]
    if name.startswith("tests_"):
        return f"{p.get('summary')} (exit {p.get('exit_status')}, {p.get('seconds')} s)"
    if name.startswith("mondrian"):
        c, w = p["cold"], p["warm"]
        ws = w["stages"]
        sy = {k: v for k, v in w["transfers"].items() if "sync" in k}
        s = (f"{p['rows']} rows: cold {c['fit_transform']} s (kernel compile {p.get('kernel_compile_s', 0.0)} s), "
             f"warm {w['fit_transform']} s (encode {ws.get('encode')}, "
             f"partition {ws.get('partition')}, generalize {ws.get('generalize')}, verify {ws.get('verify')}); "
             f"warm copies {w['transfers'].get('calls')} / {w['transfers'].get('bytes')} B" + (f"; {sy}" if sy else ""))
        if "equal_to_cpu" in p:
            s += f"; CPU {p['cpu']['fit_transform']} s, equal to CPU {p['equal_to_cpu']}"
        if "budgets" in p:
            bad = [k for k, v in p["budgets"].items() if isinstance(v, dict) and not v["ok"]]
            s += "; syncs per stage as on the double" if not bad else f"; syncs over the double's budget in {bad}"
        return s
    if name == "distpab":
        return (f"{p['rows']} rows x 4 entities: cold {p['cold']['seconds'].get('total'):.4g} s, "
                f"warm {p['warm']['seconds'].get('total'):.4g} s")
    if name == "cli":
        return (f"{p['rows']} rows (cuDF {'present' if p.get('cudf_present') else 'absent'}): cold total "
                f"{p['cold']['seconds'].get('total')} s / process {p['cold']['process_wall_s']} s; warm total "
                f"{p['warm']['seconds'].get('total')} s / process {p['warm']['process_wall_s']} s")
    if name == "cluster":
        return (f"{p['rows']} rows on {p['cluster']}: {p['cluster_fit_transform_s']} s against one process "
                f"{p['one_process_fit_transform_s']} s; equal {p['equal_to_one_process']}")
    if name in ("risk", "suda"):
        return risk_figures(name, p)
    if name == "attacks":
        return attack_figures(p)
    if name == "threshold":
        runs = ", ".join(f"{r['rows']}: cpu {r['cpu_s']:.3g} / device {r['device_s']:.3g}" for r in p["runs"])
        return f"threshold {p['threshold_rows']} rows ({runs})"
    return ""
