"""Every metric of the contract's section 7 from a :class:`~gpuanon.metrics.summary.ClassSummary`.

The arithmetic runs where the summary's arrays live (NumPy or CuPy); what comes back to the host
is one number per metric and column (:func:`gpuanon.backend.to_scalar`) and the class-size
histogram's counts.
"""

from __future__ import annotations

import numpy as np

from kernels.counts import count_values

from ..backend import get_namespace, to_device, to_host, to_scalar
from .entropy import scatter_sum, suppressed_joint, uncertainty_x
from .formulas import entropy_loss, set_entropy
from .summary import ClassSummary, ColumnSummary


def column_ncp(col: ColumnSummary):
    """NCP of every class on one column (an exact column: its spans in integers, ``col.width``)."""
    if col.kind == "numeric":
        xp = get_namespace(col.lo)
        rng = float(col.dom_range)
        if col.width is not None:
            w = xp.asarray(col.width)
        elif col.lo.dtype == np.float32:  # float32 bounds (exact values): the float64 difference
            w = np.subtract(col.hi, col.lo, dtype=np.float64)
        else:
            w = col.hi - col.lo
        return xp.where(xp.isnan(w), 0.0, w / rng) if rng > 0 else xp.zeros(col.lo.shape[0])
    xp = get_namespace(col.sets)
    dom = xp.maximum((col.counts > 0).sum(), 1)  # categories present (a 0-d array: no read)
    size = col.sets.sum(axis=1)[col.set_id]
    return xp.where(size > 1, size / dom, 0.0)


def suppressed_target_counts(summary: ClassSummary):
    """Target counts of the suppressed rows: the original table's minus the output's."""
    if summary.target_hist is None or summary.target_counts_before is None:
        return None
    xp = get_namespace(summary.target_hist)
    t = xp.asarray(summary.target_counts_before).astype(xp.float64) - summary.target_hist.sum(axis=0)
    return xp.maximum(t, 0.0)


def entropy_coefficients(summary: ClassSummary) -> dict:
    """``U(T | X_j)`` before and ``U'(T | X_j)`` after per QI, and the loss (section 7, amended).

    Suppressed rows count with the cell ``*`` (the column's marginal). A column summary without
    domain tables (built by hand) gives ``None``. On a device every column's two numbers come back
    in one read.
    """
    tsup = suppressed_target_counts(summary)
    any_sup = tsup is not None and summary.n_suppressed > 0
    r = _Reads(get_namespace(summary.sizes))
    handles, binned = {}, []
    for col in summary.columns:  # a loop over columns
        if col.joint_before is None or col.joint_after is None:
            handles[col.name] = None
            continue
        xp = get_namespace(col.joint_after)
        q = xp.asarray(col.joint_after).astype(xp.float64)
        if any_sup:
            q = q + suppressed_joint(xp.asarray(col.domain_counts).astype(xp.float64), tsup)
        handles[col.name] = (r.add(uncertainty_x(xp.asarray(col.joint_before))), r.add(uncertainty_x(q)))
        if col.binned:
            binned.append(col.name)
    r.read()
    before = {c: None if h is None else r[h[0]] for c, h in handles.items()}
    after = {c: None if h is None else r[h[1]] for c, h in handles.items()}
    ok = [c for c in before if before[c] is not None]
    loss = entropy_loss([before[c] for c in ok], [after[c] for c in ok]) if ok else None
    out = {"entropy_coefficient_before": before, "entropy_coefficient_after": after, "entropy_loss": loss}
    if binned:
        out["entropy_binned_columns"] = binned
    return out


def label_entropy_coefficients(summary: ClassSummary) -> dict:
    """Diagnostic: ``U`` over the generalized labels taken as categories (the first reading).

    A label identifies its class, so it also carries what the class's other QIs say about the
    target: this reading can exceed the original column's ``U`` (negative loss). On a device the
    label counts are read in one copy and the coefficients in another.
    """
    th = summary.target_hist
    xp = get_namespace(th)
    nt = th.shape[1]
    if xp is np:  # one column's ids at a time (made from its keys when the summary keeps no ids)
        gids = lengths = None
    else:  # every column's number of labels in one read
        gids = [xp.asarray(col.generalized_ids()) for col in summary.columns]
        full = [i for i, g in enumerate(gids) if g.shape[0]]
        lengths = dict(zip(full, to_host(xp.stack([gids[i].max() + 1 for i in full])).tolist() if full else []))
    r = _Reads(xp)
    handles = {}
    for i, col in enumerate(summary.columns):  # a loop over columns
        gid = np.asarray(col.generalized_ids()) if gids is None else gids[i]
        if gid.shape[0]:
            n_lab = int(gid.max()) + 1 if lengths is None else int(lengths[i])
            joint = xp.stack([scatter_sum(gid, th[:, t].astype(xp.float64), n_lab, xp) for t in range(nt)], axis=1)
        else:
            joint = xp.zeros((0, nt))
        handles[col.name] = (None if col.u_before is None else r.add(col.u_before), r.add(uncertainty_x(joint)))
    r.read()
    before = {c: None if hb is None else r[hb] for c, (hb, _) in handles.items()}
    after = {c: r[ha] for c, (_, ha) in handles.items()}
    ok = [c for c in before if before[c] is not None]
    return {"entropy_coefficient_before_labels": before, "entropy_coefficient_after_labels": after,
            "entropy_loss_labels": entropy_loss([before[c] for c in ok], [after[c] for c in ok]) if ok else None}


class _Reads:
    """Single numbers to bring to the host, read together: on a device one counted copy of a small
    int64 array (float64 values travel as their bits), on the CPU each one as before.

    ``add`` returns a handle; after :meth:`read`, ``reads[handle]`` is the Python number.
    """

    def __init__(self, xp):
        self.xp, self.items, self.vals = xp, [], []

    def add(self, a, kind=float) -> int:
        self.items.append((a, kind))
        return len(self.items) - 1

    def read(self) -> None:
        xp = self.xp
        dev = [i for i, (a, _) in enumerate(self.items) if xp is not np and hasattr(a, "dtype")
               and not isinstance(a, (np.ndarray, np.generic))]
        host = {}
        if dev:
            ints = [i for i in dev if self.items[i][1] is int]
            flts = [i for i in dev if self.items[i][1] is not int]
            parts = []
            if ints:
                parts.append(xp.stack([self.items[i][0] for i in ints]).astype(xp.int64))
            if flts:
                parts.append(xp.stack([self.items[i][0] for i in flts]).astype(xp.float64).view(xp.int64))
            got = to_host(xp.concatenate(parts) if len(parts) > 1 else parts[0])
            for j, i in enumerate(ints):
                host[i] = int(got[j])
            for j, i in enumerate(flts):
                host[i] = float(got[len(ints) + j:len(ints) + j + 1].view(np.float64)[0])
        self.vals = [host[i] if i in host else kind(to_scalar(a)) for i, (a, kind) in enumerate(self.items)]

    def __getitem__(self, h: int):
        return self.vals[h]


def compute_metrics(summary: ClassSummary, k: int | None = None, weights: dict | None = None,
                    histogram_bins: int = 30) -> dict:
    """Every metric of the contract's section 7 as a JSON-ready dict.

    On a device the single numbers are read in one copy and the class-size histogram's counts in
    a second (plus what the entropy coefficients read).
    """
    xp = get_namespace(summary.sizes)
    sizes = xp.asarray(summary.sizes).astype(xp.int64)
    n_in = int(summary.n_in)
    n_cls = int(sizes.shape[0])
    qis = [c.name for c in summary.columns]
    m: dict = {"n_classes": n_cls}
    r = _Reads(xp)
    h_out = r.add(sizes.sum(), int)
    m.update(n_suppressed=int(summary.n_suppressed))
    # entropy coefficient before / after (section 7 as amended: cells read on the domain D_X)
    h_cm = None
    if summary.target_hist is not None:
        m.update(entropy_coefficients(summary))
        m.update(label_entropy_coefficients(summary))
        th = xp.asarray(summary.target_hist)
        h_cm = r.add((sizes - th.max(axis=1)).sum(), int) if n_cls else None
    else:
        m.update(entropy_coefficient_before=None, entropy_coefficient_after=None, entropy_loss=None,
                 entropy_coefficient_before_labels=None, entropy_coefficient_after_labels=None,
                 entropy_loss_labels=None, cm=None)
    fsizes = sizes.astype(xp.float64)
    # Gionis-Tassa conditional entropy
    h_gt = {}
    for col in summary.columns:
        h = col.gt_h if col.kind == "numeric" else set_entropy(col.sets, col.counts)[col.set_id]
        h_gt[col.name] = (r.add((h * fsizes).sum()), r.add(col.h_bits))
    # NCP
    h_ncp = {col.name: r.add((column_ncp(col) * fsizes).sum()) for col in summary.columns}
    h_dm = r.add((sizes * sizes).sum(), int)
    hcols = [c for c in summary.columns if c.levels is not None]
    h_lv = [(r.add((c.levels * fsizes).sum()), float(c.height)) for c in hcols]
    if n_cls:
        h_min, h_max, h_med = r.add(sizes.min(), int), r.add(sizes.max(), int), r.add(xp.median(fsizes))
    r.read()
    n_out = r[h_out]
    m = {"n_classes": n_cls, "n_rows_out": n_out, **m}
    if h_cm is not None or (summary.target_hist is not None and not n_cls):
        m["cm"] = float(((r[h_cm] if h_cm is not None else 0) + summary.n_suppressed) / max(n_in, 1))
    gt_total, gt_norm_den, per_gt = 0.0, 0.0, {}
    for name, (hv, hb) in h_gt.items():
        v = r[hv]
        per_gt[name] = v
        gt_total += v
        gt_norm_den += n_out * r[hb]
    m["gionis_tassa"] = {"total_bits": gt_total, "normalized": gt_total / gt_norm_den if gt_norm_den > 0 else 0.0,
                         "per_column_bits": per_gt}
    w = np.array([1.0 if weights is None else float(weights.get(c, 0.0)) for c in qis])
    w = w / w.sum() if w.sum() > 0 else np.full(len(qis), 1.0 / max(len(qis), 1))
    per_ncp = {name: r[hv] / max(n_out, 1) for name, hv in h_ncp.items()}
    m["ncp"] = float(sum(wi * per_ncp[c] for wi, c in zip(w, qis)))
    m["ncp_per_column"] = per_ncp
    m["ncp_weights"] = dict(zip(qis, map(float, w)))
    # discernibility, C_avg
    m["dm"] = r[h_dm] + int(summary.n_suppressed) * n_in
    m["c_avg"] = float((n_out / n_cls) / k) if (k and n_cls) else None
    # precision (hierarchy-generalized columns only): 1 - sum over cells of level / height / cells
    if hcols and n_out:
        lv = sum(r[hv] / height for hv, height in h_lv)
        m["precision"] = float(1.0 - lv / (n_out * len(hcols)))
    else:
        m["precision"] = 1.0 if hcols else None
    # class sizes
    if n_cls:
        lo_s, hi = r[h_min], r[h_max]
        width = max(1, -(-(hi - lo_s + 1) // histogram_bins))  # integer-wide bins of equal width
        n_bins = -(-(hi - lo_s + 1) // width)
        edges = lo_s + width * np.arange(n_bins + 1)
        if xp is np:
            counts = to_host(xp.histogram(sizes, bins=to_device(edges, xp))[0])
        else:  # bin (size - min) // width: the histogram's bins (the last edge lies above the largest size)
            counts = to_host(count_values((sizes - lo_s) // width, n_bins, xp))
        m["class_size"] = {"min": lo_s, "median": r[h_med], "max": hi, "mean": n_out / n_cls,
                           "histogram": {"edges": edges.tolist(), "counts": counts.tolist()}}
    return m
