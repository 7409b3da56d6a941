"""The JSON report of an anonymization: what the estimator did (``Mondrian.report_``), and what the
``anonymize`` command adds around it (input, output, the verification, read / write timings).

The pages (:mod:`gpuanon.report.pages`) and ``gpuanon check`` read the keys built here.
"""

from __future__ import annotations

from typing import Any

from kernels.segmented import compile_seconds

#: the order of ``seconds`` in a command's report: the pipeline's stages between reading and writing
#: (``kernel_compile``, on a device: the first launches of kernels, a part of the stages before it)
STAGE_ORDER = ("read", "encode", "partition", "optimize", "hierarchies", "class_statistics", "generalize",
               "verify", "metrics", "kernel_compile", "write", "total")


def anonymization_report(result, *, n_rows_in: int, n_rows_out: int) -> dict[str, Any]:
    """``Mondrian.report_``: the fit record ``result`` (:class:`~gpuanon.anonymize.result.FitResult`,
    from either runner; its verification and metrics set) with its plan's parameters, on a table of
    ``n_rows_in`` rows published as ``n_rows_out``. A cluster run adds ``cluster``."""
    r, v, plan = result, result.verification, result.plan
    report = {
        "backend": r.backend.name,
        "backend_reason": r.backend.reason,
        "device": r.backend.device,
        "n_rows_in": int(n_rows_in),
        "n_rows_out": int(n_rows_out),
        "n_suppressed": int(r.n_suppressed),
        "suppression_reason": r.suppression_reason,
        "n_missing": r.n_missing(),
        # rows with a missing sensitive value: they protect nobody, no kind of l counts them
        "n_sensitive_missing": int(r.sensitive_missing()),
        "n_partitions": int(r.n_partitions),
        "n_classes": int(v.n_classes),
        "requested": {"k": int(plan.k), "l": int(plan.l or 0), "l_kind": plan.l_kind,
                      "t": plan.t, "t_distance": plan.t_distance},
        "achieved": {"k": v.k, "l": v.l, "t": v.t, "t_distance": r.criteria.t_distance},
        "class_size": v.size_stats,
        "mode": plan.mode,
        "format": plan.output_format,
        "roles": r.schema.to_dict(),
        "partition": dict(r.partition_info),
        "metrics": r.metrics,
        "hierarchies": r.hierarchies,
        "optimization": optimization_section(r),
        "encoding": r.encoding_metadata(),
        "seconds": dict({k: round(x, 6) for k, x in r.timings.items()},
                        **(kernel_compile(r.compile_mark) if r.compile_mark is not None else {})),
        "transfers": r.transfers.to_dict(),
    }
    if r.cluster is not None:
        report["cluster"] = r.cluster.section()
    return report


def optimization_section(result) -> dict | None:
    """The optimization step's counts (exact classes kept, their rows, groups given back), and the
    entropy-coefficient loss of the classes before the step and after it (the final metric), where
    known (both need a target; a cluster measures the loss before from its homes' partitions
    before the step); None when the step did not run."""
    opt = result.optimization
    if opt is None:
        return None
    before = result.optimize_loss_before
    after = (result.metrics or {}).get("entropy_loss")
    return dict(opt, entropy_loss_before=before, entropy_loss_after=after if before is not None else None)


def kernel_compile(since: dict | None) -> dict[str, float]:
    """``{"kernel_compile": seconds}``: the first launches of device kernels since the mark ``since``
    (a copy of ``kernels.segmented.compile_seconds``; None: since the process started).

    A kernel's first launch on a device compiles it (NVRTC), loads it and runs it once: that time is
    inside the stage that launched it (a cold run) and is reported apart here, so that a cold run's
    stages less this are its warm time. Absent on the CPU, or when every kernel was compiled before.
    """
    since = since or {}
    total = sum(v - since.get(k, 0.0) for k, v in compile_seconds.items())
    return {"kernel_compile": round(total, 6)} if total > 0 else {}


def command_report(report: dict, *, source: str, output: str | None, verification: dict, read: float,
                   write: float, total: float) -> dict:
    """The ``anonymize`` command's report: ``report`` (``Mondrian.report_``, updated in place) with the
    input and output named, the verification, and ``seconds`` in pipeline order with read, write, total.

    >>> r = command_report({"seconds": {"partition": 0.5, "encode": 0.25}}, source="in.csv", output=None,
    ...                    verification={"ok": True}, read=0.1, write=0.0, total=1.0)
    >>> r["seconds"], r["input"], r["verification"]
    ({'read': 0.1, 'encode': 0.25, 'partition': 0.5, 'write': 0.0, 'total': 1.0}, 'in.csv', {'ok': True})
    """
    secs = dict(report["seconds"], read=round(read, 6), write=round(write, 6), total=round(total, 6))
    report["seconds"] = {k: secs[k] for k in STAGE_ORDER if k in secs}
    report["input"] = source
    report["output"] = output
    report["verification"] = verification
    return report
