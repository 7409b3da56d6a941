"""Every metric of the contract's section 7 from a :class:`~gpuanon.metrics.summary.ClassSummary`.

The arithmetic runs where the summary's arrays live (NumPy or CuPy); what comes back to the host
is one number per metric and column (:func:`gpuanon.backend.to_scalar`) and the class-size
histogram's counts.
"""

from __future__ import annotations

import numpy as np

from ..backend import array_module, to_device, to_host, to_scalar
from .entropy import suppressed_joint, uncertainty_x
from .formulas import entropy_loss, set_entropy
from .summary import ClassSummary, ColumnSummary


def _num(a) -> float | None:
    return None if a is None else float(to_scalar(a))


def column_ncp(col: ColumnSummary):
    """NCP of every class on one column."""
    if col.kind == "numeric":
        xp = array_module(col.lo)
        rng = float(col.dom_range)
        w = col.hi - col.lo
        return xp.where(xp.isnan(w), 0.0, w / rng) if rng > 0 else xp.zeros(col.lo.shape[0])
    xp = array_module(col.sets)
    dom = max(int(to_scalar((col.counts > 0).sum())), 1)
    size = col.sets.sum(axis=1)[col.set_id]
    return xp.where(size > 1, size / dom, 0.0)


def suppressed_target_counts(summary: ClassSummary):
    """Target counts of the suppressed rows: the original table's minus the output's."""
    if summary.target_hist is None or summary.target_counts_before is None:
        return None
    xp = array_module(summary.target_hist)
    t = xp.asarray(summary.target_counts_before).astype(xp.float64) - summary.target_hist.sum(axis=0)
    return xp.maximum(t, 0.0)


def entropy_coefficients(summary: ClassSummary) -> dict:
    """``U(T | X_j)`` before and ``U'(T | X_j)`` after per QI, and the loss (section 7, amended).

    Suppressed rows count with the cell ``*`` (the column's marginal). A column summary without
    domain tables (built by hand) gives ``None``.
    """
    tsup = suppressed_target_counts(summary)
    any_sup = tsup is not None and summary.n_suppressed > 0
    before, after, binned = {}, {}, []
    for col in summary.columns:  # a loop over columns
        if col.joint_before is None or col.joint_after is None:
            before[col.name] = after[col.name] = None
            continue
        xp = array_module(col.joint_after)
        q = xp.asarray(col.joint_after).astype(xp.float64)
        if any_sup:
            q = q + suppressed_joint(xp.asarray(col.domain_counts).astype(xp.float64), tsup)
        before[col.name] = _num(uncertainty_x(xp.asarray(col.joint_before)))
        after[col.name] = _num(uncertainty_x(q))
        if col.binned:
            binned.append(col.name)
    ok = [c for c in before if before[c] is not None]
    loss = entropy_loss([before[c] for c in ok], [after[c] for c in ok]) if ok else None
    out = {"entropy_coefficient_before": before, "entropy_coefficient_after": after, "entropy_loss": loss}
    if binned:
        out["entropy_binned_columns"] = binned
    return out


def label_entropy_coefficients(summary: ClassSummary) -> dict:
    """Diagnostic: ``U`` over the generalized labels taken as categories (the first reading).

    A label identifies its class, so it also carries what the class's other QIs say about the
    target: this reading can exceed the original column's ``U`` (negative loss).
    """
    before, after = {}, {}
    th = summary.target_hist
    xp = array_module(th)
    nt = th.shape[1]
    for col in summary.columns:
        before[col.name] = _num(col.u_before)
        gid = xp.asarray(col.generalized_ids())
        if gid.shape[0]:
            joint = xp.stack([xp.bincount(gid, weights=th[:, t].astype(xp.float64)) for t in range(nt)], axis=1)
        else:
            joint = xp.zeros((0, nt))
        after[col.name] = _num(uncertainty_x(joint))
    ok = [c for c in before if before[c] is not None]
    return {"entropy_coefficient_before_labels": before, "entropy_coefficient_after_labels": after,
            "entropy_loss_labels": entropy_loss([before[c] for c in ok], [after[c] for c in ok]) if ok else None}


def compute_metrics(summary: ClassSummary, k: int | None = None, weights: dict | None = None,
                    histogram_bins: int = 30) -> dict:
    """Every metric of the contract's section 7 as a JSON-ready dict."""
    xp = array_module(summary.sizes)
    sizes = xp.asarray(summary.sizes).astype(xp.int64)
    n_out, n_in = int(to_scalar(sizes.sum())), int(summary.n_in)
    n_cls = int(sizes.shape[0])
    qis = [c.name for c in summary.columns]
    m: dict = {"n_classes": n_cls, "n_rows_out": n_out, "n_suppressed": int(summary.n_suppressed)}
    # entropy coefficient before / after (section 7 as amended: cells read on the domain D_X)
    if summary.target_hist is not None:
        m.update(entropy_coefficients(summary))
        m.update(label_entropy_coefficients(summary))
        th = xp.asarray(summary.target_hist)
        cm_pen = int(to_scalar((sizes - th.max(axis=1)).sum())) if n_cls else 0
        m["cm"] = float((cm_pen + summary.n_suppressed) / max(n_in, 1))
    else:
        m.update(entropy_coefficient_before=None, entropy_coefficient_after=None, entropy_loss=None,
                 entropy_coefficient_before_labels=None, entropy_coefficient_after_labels=None,
                 entropy_loss_labels=None, cm=None)
    fsizes = sizes.astype(xp.float64)
    # Gionis-Tassa conditional entropy
    gt_total, gt_norm_den, per_gt = 0.0, 0.0, {}
    for col in summary.columns:
        h = col.gt_h if col.kind == "numeric" else set_entropy(col.sets, col.counts)[col.set_id]
        v = float(to_scalar((h * fsizes).sum()))
        per_gt[col.name] = v
        gt_total += v
        gt_norm_den += n_out * float(to_scalar(col.h_bits))
    m["gionis_tassa"] = {"total_bits": gt_total, "normalized": gt_total / gt_norm_den if gt_norm_den > 0 else 0.0,
                         "per_column_bits": per_gt}
    # NCP
    w = np.array([1.0 if weights is None else float(weights.get(c, 0.0)) for c in qis])
    w = w / w.sum() if w.sum() > 0 else np.full(len(qis), 1.0 / max(len(qis), 1))
    per_ncp = {col.name: float(to_scalar((column_ncp(col) * fsizes).sum())) / max(n_out, 1)
               for col in summary.columns}
    m["ncp"] = float(sum(wi * per_ncp[c] for wi, c in zip(w, qis)))
    m["ncp_per_column"] = per_ncp
    m["ncp_weights"] = dict(zip(qis, map(float, w)))
    # discernibility, C_avg
    m["dm"] = int(to_scalar((sizes * sizes).sum())) + int(summary.n_suppressed) * n_in
    m["c_avg"] = float((n_out / n_cls) / k) if (k and n_cls) else None
    # precision (hierarchy-generalized columns only): 1 - sum over cells of level / height / cells
    hcols = [c for c in summary.columns if c.levels is not None]
    if hcols and n_out:
        lv = sum(float(to_scalar((c.levels * fsizes).sum())) / float(c.height) for c in hcols)
        m["precision"] = float(1.0 - lv / (n_out * len(hcols)))
    else:
        m["precision"] = 1.0 if hcols else None
    # class sizes
    if n_cls:
        lo_s, hi = int(to_scalar(sizes.min())), int(to_scalar(sizes.max()))
        width = max(1, -(-(hi - lo_s + 1) // histogram_bins))  # integer-wide bins of equal width
        edges = lo_s + width * np.arange(-(-(hi - lo_s + 1) // width) + 1)
        counts = to_host(xp.histogram(sizes, bins=to_device(edges, xp))[0])
        m["class_size"] = {"min": lo_s, "median": float(to_scalar(xp.median(fsizes))), "max": hi,
                           "mean": n_out / n_cls,
                           "histogram": {"edges": edges.tolist(), "counts": counts.tolist()}}
    return m
