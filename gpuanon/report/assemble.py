"""The JSON report of an anonymization: what the estimator did (``Mondrian.report_``), and what the
``anonymize`` command adds around it (input, output, the verification, read / write timings).

The pages (:mod:`gpuanon.report.pages`) and ``gpuanon check`` read the keys built here.
"""

from __future__ import annotations

from typing import Any

#: the order of ``seconds`` in a command's report: the pipeline's stages between reading and writing
#: (``kernel_compile``, on a device: the first launches of kernels, a part of the stages before it)
STAGE_ORDER = ("read", "encode", "partition", "optimize", "hierarchies", "class_statistics", "generalize",
               "verify", "metrics", "kernel_compile", "write", "total")


def anonymization_report(model, df, out, res) -> dict[str, Any]:
    """``Mondrian.report_``: the fitted estimator ``model``'s run on ``df`` (output ``out``, verification ``res``)."""
    table = model.table_
    return {
        "backend": model.backend_.name,
        "backend_reason": model.backend_.reason,
        "device": model.backend_.device,
        "n_rows_in": int(len(df)),
        "n_rows_out": int(len(out)),
        "n_suppressed": int(model.n_suppressed_),
        "suppression_reason": model._suppression_reason,
        "n_missing": {c.name: c.n_missing for c in table.columns if c.n_missing},
        # rows with a missing sensitive value: they protect nobody, no kind of l counts them
        "n_sensitive_missing": table.sa_missing_rows(),
        "n_partitions": int(model.n_partitions_),
        "n_classes": int(res.n_classes),
        "requested": {"k": int(model.k), "l": int(model.l or 0), "l_kind": model.l_kind,
                      "t": model.t, "t_distance": model.t_distance},
        "achieved": {"k": res.k, "l": res.l, "t": res.t, "t_distance": model.criteria_.t_distance},
        "class_size": res.size_stats,
        "mode": model.mode,
        "format": model.output_format,
        "roles": model.schema_.to_dict(),
        "partition": dict(model.partition_info_),
        "metrics": model.metrics_,
        "hierarchies": model.hierarchies_,
        "optimization": optimization_section(model),
        "encoding": table.encoding_metadata(),
        "seconds": dict({k: round(v, 6) for k, v in model._timings.items()},
                        **kernel_compile(getattr(model, "_compile_mark", None))),
        "transfers": model._transfers.to_dict(),
    }


def optimization_section(model) -> dict | None:
    """The optimization step's counts (exact classes kept, their rows, groups given back), and the
    entropy-coefficient loss of the classes before the step and after it (the final metric), where
    known; None when the step did not run."""
    opt = getattr(model, "optimization_", None)
    if opt is None:
        return None
    before = getattr(model, "_optimize_loss_before", None)
    after = (model.metrics_ or {}).get("entropy_loss")
    return dict(opt, entropy_loss_before=before, entropy_loss_after=after if before is not None else None)


def kernel_compile(since: dict | None) -> dict[str, float]:
    """``{"kernel_compile": seconds}``: the first launches of device kernels since the mark ``since``
    (a copy of ``kernels.segmented.compile_seconds``; None: since the process started).

    A kernel's first launch on a device compiles it (NVRTC), loads it and runs it once: that time is
    inside the stage that launched it (a cold run) and is reported apart here, so that a cold run's
    stages less this are its warm time. Absent on the CPU, or when every kernel was compiled before.
    """
    from kernels.segmented import compile_seconds  # noqa: PLC0415

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
