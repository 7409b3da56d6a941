"""Output classes split across homes: partitions finished on different workers that publish the same cells.

One process's verifier groups the output rows by their published cells, so two partitions with
equal cells (relaxed cuts split ties; exact classes of the optimization step with one tuple in
two partitions; two halves of a hierarchy node) are one output class. When those partitions were
finished on different homes, no home sees the whole class. Each home reports one hash per class
of its cells (``Home.stages``); a hash found on two homes or more is *shared*. Then:

* every home holding shared classes verifies its other rows again (:func:`split_home`, a worker
  task) and sends, per shared class, its size and sensitive histogram (a few integers);
* the coordinator sums them per hash and verifies the merged classes with the same verifier
  (:func:`merge_shared`, on rows rebuilt from the histograms: the verifier reads sizes and
  sensitive counts only), and :func:`with_shared` joins that result to the homes'.

The class sizes of the output (k, the size statistics) are grouped by hash over every home in
:func:`.checks.combine_stages`; the metrics merge equal generalized values in
:func:`.metrics.combine_summaries`.
"""

from __future__ import annotations

import numpy as np

from ..release import verify as verify_mod
from ..backend import to_device, to_host
from ..errors import BackendError


def split_home(home, serial, enc, fmt: str, verify_kw: dict, q, shared_mask):
    """Worker task: verify the home's rows outside the shared classes; sizes and sensitive histograms
    of the shared ones (``shared_mask``: one bool per class position of ``Home.stages``)."""
    if home.serial != serial:
        raise BackendError(f"home {home.index} was rebuilt after its worker was lost")
    xp = home.xp
    cs = home.class_stats(enc)  # the one Home.stages used: its cells are computed already
    cells = cs.published_cells(fmt)
    mask = to_device(np.asarray(shared_mask, dtype=bool), xp)
    keep = ~mask[cs.row_pos]
    kw = {k: v for k, v in verify_kw.items() if not k.startswith("_")}
    sa = home.sa if home.sa is not None and verify_kw.get("_has_sa", True) else None
    res = verify_mod.verify_encoded(cs.row_pos[keep], cells, None if sa is None else sa[keep],
                                    None if sa is None else q, xp=xp, **kw)
    hist = None
    if sa is not None:
        hist = to_host(cs.histogram(sa, len(enc.sa_values))[mask])
    return res, hist


def shared_hashes(hres: list) -> np.ndarray:
    """Hashes of published cells found on more than one home (sorted)."""
    per_home = [np.unique(h["hash"]) for h in hres if h is not None]
    if len(per_home) < 2:
        return np.zeros(0, dtype=np.uint64)
    u, cnt = np.unique(np.concatenate(per_home), return_counts=True)
    return u[cnt > 1]


def merge_shared(run, homes, hs, hres: list, enc, fmt: str, verify_kw: dict, q):
    """Re-verify the homes holding shared classes and verify the merged classes here.

    Replaces those homes' ``hres[d]["verify"]`` (their other rows) and returns the merged classes'
    :class:`~gpuanon.release.verify.VerificationResult`, or None when no class is shared.
    """
    shared = shared_hashes(hres)
    if shared.shape[0] == 0:
        return None
    masks = {d: np.isin(h["hash"], shared) for d, h in enumerate(hres) if h is not None}
    masks = {d: m for d, m in masks.items() if m.any()}
    run.stage = "verifying classes shared by several workers"
    got = run.gather([run.submit(d, split_home, homes[d], hs[d], enc, fmt, verify_kw, q, m) for d, m in masks.items()])
    hashes, sizes, hists = [], [], []
    for (d, m), (res, hist) in zip(masks.items(), got):
        hres[d]["verify"] = res
        hashes.append(hres[d]["hash"][m])
        sizes.append(np.asarray(hres[d]["sizes"])[m])
        hists.append(hist)
    u, inv = np.unique(np.concatenate(hashes), return_inverse=True)
    inv = inv.reshape(-1)
    n = u.shape[0]
    msize = np.bincount(inv, weights=np.concatenate(sizes), minlength=n).astype(np.int64)
    gid = np.repeat(np.arange(n, dtype=np.int64), msize)
    sa = None
    kw = {k: v for k, v in verify_kw.items() if not k.startswith("_")}
    if hists[0] is not None:
        h = np.concatenate(hists, axis=0).astype(np.int64)
        n_sa = h.shape[1]
        mh = np.zeros((n, n_sa), dtype=np.int64)
        np.add.at(mh, inv, h)
        sa = np.repeat(np.tile(np.arange(n_sa, dtype=np.int64), n), mh.reshape(-1))
    return verify_mod.verify_encoded(gid, [np.arange(n, dtype=np.uint64)], sa, None if sa is None else q, xp=np,
                                     **kw)


def with_shared(res, merged):
    """The homes' combined verification joined with the merged classes' (``merged`` may be None).

    ``res``'s classes and sizes already group the shared classes (by hash); its per-row counts
    and the l / t bounds come from the homes' other rows, to which the merged classes' are added.
    """
    if merged is None:
        return res

    def join(f, a, b):
        vals = [v for v in (a, b) if v is not None]
        return f(vals) if vals else None

    res.n_rows = int(res.n_rows + merged.n_rows)
    res.sensitive_missing = int(res.sensitive_missing + merged.sensitive_missing)
    res.l = join(min, res.l, merged.l)
    res.l_entropy = join(min, res.l_entropy, merged.l_entropy)
    res.t = join(max, res.t, merged.t)
    res.failures = list(res.failures) + [f for f in merged.failures if f not in res.failures]
    return res
