"""Class statistics: per-class statistics of an encoded table for a labelling of its rows.

Built once on the table's device after partitioning (one stable sort of the kept rows by class)
and shared by generalization, the published cells the verifier groups by, and the metrics:
per-QI key min / max, means, category masks and set ids, hierarchy nodes (the lowest-common-node
kernel), target and other histograms, each computed at first use and kept. Nothing here loops
over rows or classes in Python.
"""

from __future__ import annotations

import numpy as np

from kernels.counts import count_values
from kernels.hierarchy import lowest_common_node
from kernels.keys import MISSING
from kernels.segmented import count_segment_checks, group_starts, segment_ids, segment_reduce

from ..backend import namespace_by_name, to_device, to_host, to_scalar
from ..table.encoding import Table
from ..table.exact import exact_means, unsigned_offsets


def _by_class(lab, xp):
    """``(order, lab[order])``: the stable order of the kept rows by class. On the CPU one sort of
    ``label << 32 | position`` (NumPy's sort of 64-bit keys is several times faster than its stable
    argsort; labels and positions lie below ``2**32``); the same order."""
    n = int(lab.shape[0])
    if xp is not np or n < 1024 or n >= 1 << 32 or (n and int(lab.max()) >= 1 << 32):
        order = xp.argsort(lab, kind="stable")
        return order, lab[order]
    key = lab.astype(np.uint64) << np.uint64(32)
    key |= np.arange(n, dtype=np.uint64)
    key.sort()
    order = (key & np.uint64(0xFFFFFFFF)).astype(np.int64)
    key >>= np.uint64(32)
    return order, key.astype(lab.dtype)


class ClassStats:
    """Per-class statistics of every QI for a labelling of the kept rows, on the table's device.

    Built once after partitioning; every per-column statistic is computed at first use and kept,
    so generalization, the published cells and the metrics share one sort by class.
    """

    def __getstate__(self):  # a pickle keeps the array module by name, as the table does
        return dict(self.__dict__, xp="numpy" if self.xp is np else "cupy")

    def __setstate__(self, state):
        self.__dict__.update(state, xp=namespace_by_name(state["xp"]))

    def __init__(self, table: Table, labels, n_classes: int):
        xp = table.xp
        self.table = table
        self.xp = xp
        kept = xp.nonzero(labels >= 0)[0]
        lab = labels[kept]
        order, slab = _by_class(lab, xp)
        self.rows = kept[order]  # kept rows sorted by class
        self.starts = group_starts(slab, xp)
        self.sizes = xp.diff(xp.concatenate([self.starts, xp.full(1, slab.shape[0], dtype=xp.int64)]))
        self.class_ids = slab[self.starts]
        self.n_classes = n_classes
        self.kept = kept
        self.n_kept = int(kept.shape[0])
        pos_of_id = xp.zeros(max(n_classes, 1), dtype=xp.int64)
        pos_of_id[self.class_ids] = xp.arange(self.class_ids.shape[0], dtype=xp.int64)
        self.row_pos = pos_of_id[lab]  # class position (0..#classes-1) of each kept row, input order
        self._cache: dict = {}

    @property
    def row_class(self):
        """Class id of each kept row, in input order (made when read: the labels of the kept rows)."""
        return self.class_ids[self.row_pos]

    @property
    def n(self) -> int:
        """Number of classes (distinct labels among the kept rows)."""
        return int(self.starts.shape[0])

    def _memo(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def key_minmax(self, j: int):
        """Smallest and largest key (uint32) of every class on column ``j``."""
        def f():
            if self.xp is np and self.n_kept:  # the CPU: the keys in input order scattered by class (no
                # gather of the column in class order: a random read per row of a column-long array)
                k = self.table.keys[j]
                k = k if self.n_kept == k.shape[0] else k[self.kept]
                # the reads of the segment checks of the two reductions the device formulation runs
                # on NumPy: counted for a CPU run's report, not made (the scatter needs no check)
                count_segment_checks(self.starts, times=2)
                lo = np.full(self.n, np.iinfo(k.dtype).max, dtype=k.dtype)
                hi = np.zeros(self.n, dtype=k.dtype)
                np.minimum.at(lo, self.row_pos, k)
                np.maximum.at(hi, self.row_pos, k)
                return lo, hi
            k = self.table.keys[j][self.rows]
            return (segment_reduce("minimum", k, self.starts, self.xp, axis=0),
                    segment_reduce("maximum", k, self.starts, self.xp, axis=0))
        return self._memo(("keys", j), f)

    def numeric_minmax(self, j: int):
        kmin, kmax = self.key_minmax(j)
        return self.table.numeric_values(j, kmin), self.table.numeric_values(j, kmax)

    def numeric_mean(self, j: int):
        def f():
            t, xp = self.table, self.xp
            v = t.numeric_values(j, t.keys[j][self.rows])
            # a fixed-order sum: the same bits on every backend and every run
            return segment_reduce("add", v, self.starts, xp, axis=0, max_size=self.max_size) / self.sizes
        return self._memo(("mean", j), f)

    def exact_mean(self, j: int):
        """``(means, missing)`` on the host of every class on exact column ``j`` (integers beyond
        2**53, dates and times: :func:`gpuanon.table.exact.exact_means`), from exact per-class sums."""
        def f():
            t, xp = self.table, self.xp
            ex = t.columns[j].exact
            k = t.keys[j][self.rows]
            miss = k == MISSING
            off = unsigned_offsets(ex)
            if off.shape[0] == 0:  # every value missing
                n = self.n
                return np.zeros(n, dtype=ex.values.dtype), np.ones(n, dtype=bool)
            u = to_device(off, xp)[xp.where(miss, 0, k).astype(xp.int64)]
            lo = segment_reduce("add", u & xp.uint64(0xFFFFFFFF), self.starts, xp)
            hi = segment_reduce("add", u >> xp.uint64(32), self.starts, xp)
            sums = to_host(xp.stack([lo, hi, self.sizes.astype(xp.uint64), miss[self.starts].astype(xp.uint64)]))
            return exact_means(ex, sums[0], sums[1], sums[2], sums[3].astype(bool))
        return self._memo(("exact_mean", j), f)

    @property
    def max_size(self) -> int:
        """Rows in the largest class (one scalar read, kept)."""
        return self._memo("max_size", lambda: int(to_scalar(self.sizes.max())) if self.n_kept else 0)

    def code_minmax(self, j: int):
        """Smallest and largest code of every class on categorical column ``j``."""
        lo, hi = self.key_minmax(j)
        return lo.astype(self.xp.int64), hi.astype(self.xp.int64)

    def hierarchy_nodes(self, j: int, code_levels=None):
        """Lowest common hierarchy node of every class on column ``j`` and its level (device arrays).

        Codes follow the hierarchy's leaf order, so the node covering a class covers its smallest
        and largest code: the first level where their paths meet.
        """
        lv = self.table.hierarchies[self.table.columns[j].name].code_levels if code_levels is None else code_levels
        xp = self.xp

        def f():
            lo, hi = self.code_minmax(j)
            return lowest_common_node(lv, lo, hi, xp)
        if code_levels is not None:
            return f()
        return self._memo(("nodes", j, id(lv)), f)

    def category_masks(self, j: int):
        """(n_classes, words) uint64 bitmask of the codes present in each class.

        One scatter-or of every row's bit into ``[class, code // 64]`` (codes past the last word
        set no bit).
        """
        def f():
            t, xp = self.table, self.xp
            ncat = t.columns[j].n_categories
            words = max(1, -(-ncat // 64))
            if xp is np and words == 1 and self.n_kept:  # the CPU: rows sorted by class, one OR per class
                bit = np.left_shift(np.uint64(1), t.keys[j].take(self.rows).astype(np.uint64))
                return np.bitwise_or.reduceat(bit, self.starts)[:, None]
            code = t.keys[j][self.rows].astype(xp.int64)
            word = code // 64
            inside = word < words
            bit = xp.where(inside, xp.left_shift(xp.uint64(1), (code % 64).astype(xp.uint64)), xp.uint64(0))
            out = xp.zeros(self.starts.shape[0] * words, dtype=xp.uint64)
            xp.bitwise_or.at(out, self.row_segment * words + xp.where(inside, word, 0), bit.astype(xp.uint64))
            return out.reshape(-1, words)
        return self._memo(("masks", j), f)

    @property
    def row_segment(self):
        """Class position (0..#classes-1) of every row of ``rows`` (the kept rows sorted by class)."""
        return self._memo("row_segment", lambda: segment_ids(self.sizes, self.xp, n=self.n_kept))

    def set_ids(self, j: int):
        """A uint64 per class, equal exactly when the classes hold the same set of categories."""
        def f():
            xp = self.xp
            m = self.category_masks(j)
            if m.shape[1] == 1:
                return m[:, 0]
            order = xp.lexsort(m.T[::-1])
            sm = m[order]
            new = xp.ones(m.shape[0], dtype=bool)
            new[1:] = (sm[1:] != sm[:-1]).any(axis=1)
            ids = xp.empty(m.shape[0], dtype=xp.uint64)
            ids[order] = (xp.cumsum(new.astype(xp.int64)) - 1).astype(xp.uint64)
            return ids
        return self._memo(("setid", j), f)

    def histogram(self, codes, n_values: int):
        """(classes, n_values) counts of ``codes`` (a per-row code array) in every class."""
        xp = self.xp
        flat = self.row_segment * n_values + codes[self.rows].astype(xp.int64)
        return count_values(flat, self.starts.shape[0] * n_values, xp).reshape(-1, n_values)

    def target_hist(self):
        t = self.table
        if t.target is None:
            return None
        return self._memo("target_hist", lambda: self.histogram(t.target, max(len(t.target_values), 1)))

    def published_cells(self, fmt: str) -> list:
        """The canonical published cell of every class on every output QI column (uint64, device).

        Numeric ``range`` / ``minmax``: the interval's two order-preserving keys ``lo << 32 | hi``
        (the ``_min`` and ``_max`` columns of ``minmax`` are one interval); ``mean``: the bits of
        the mean; categorical: the set's bitmask or id, or the hierarchy node. This is what the
        verifier groups rows by; the text is made from the same per-class values.
        """
        xp = self.xp
        out = []
        for j, col in enumerate(self.table.columns):
            if col.kind == "categorical":
                if col.name in self.table.hierarchies:
                    out.append(self.hierarchy_nodes(j)[0].astype(xp.uint64))
                else:
                    out.append(self.set_ids(j))
            elif fmt == "mean":
                if col.exact is not None:  # the published exact mean (missing: the bits of NaN)
                    means, miss = self.exact_mean(j)
                    bits = np.where(miss, np.float64(np.nan).view(np.uint64), means.view(np.uint64))
                    out.append(to_device(bits, xp))
                    continue
                m = self.numeric_mean(j) + 0.0
                out.append(xp.where(xp.isnan(m), xp.nan, m).view(xp.uint64))
            else:
                lo, hi = self.key_minmax(j)
                out.append((lo.astype(xp.uint64) << xp.uint64(32)) | hi.astype(xp.uint64))
        return out
