"""The coordinator's share of a distributed Mondrian level: spans from the shards' combined
statistics, and exact lower medians by radix selection over the shards' bin counts."""

from __future__ import annotations

import numpy as np

RADIX_BITS = 8

def representative_rows(mn, mx, pres: dict, kinds_by_index):
    """Keys of one representative segment per partition: each numeric column's smallest then
    largest key (repeated), each categorical column's present codes (the last repeated).

    A segment's span depends only on these, so the kernel's spans of these segments are the
    partitions' spans. Returns ``(keys (d, M), sizes (P,))``.
    """
    d, P = mn.shape
    cnt = [pres[j].sum(axis=1) for j in sorted(pres)]
    m = np.maximum(2, np.max(np.stack(cnt), axis=0) if cnt else np.zeros(P, dtype=np.int64)).astype(np.int64)
    seg = np.repeat(np.arange(P, dtype=np.int64), m)
    starts = np.concatenate([[0], np.cumsum(m)[:-1]]).astype(np.int64)
    r = np.arange(seg.shape[0], dtype=np.int64) - starts[seg]
    K = np.empty((d, seg.shape[0]), dtype=np.uint32)
    for j in range(d):  # a loop over columns
        if j in pres:
            pp, cc = np.nonzero(pres[j])  # row-major: by partition, then by code
            c = pres[j].sum(axis=1)
            off = np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64)
            K[j] = cc[off[seg] + np.minimum(r, c[seg] - 1)].astype(np.uint32)
        else:
            K[j] = np.where(r == 0, mn[j][seg], mx[j][seg])
    return K, m


def radix_select(count_round, lo, hi, rank, bits: int = RADIX_BITS):
    """The key of rank ``rank`` in every partition, from summed per-shard bin counts.

    ``lo`` / ``hi``: each partition's smallest and largest key (uint64); the bits they share are
    the selected key's too and are not counted.
    """
    diff = int((lo ^ hi).max()) if lo.shape[0] else 0
    total = max(bits, -(-diff.bit_length() // bits) * bits)
    prefix = (lo >> np.uint64(total)) if total < 64 else np.zeros_like(lo)
    rank = rank.astype(np.int64).copy()
    rounds = 0
    for shift in range(total - bits, -1, -bits):  # a loop over digits
        cnt = count_round(prefix, shift, bits)
        rounds += 1
        cum = np.cumsum(cnt, axis=1)
        b = (cum <= rank[:, None]).sum(axis=1)
        below = np.where(b > 0, cum[np.arange(cum.shape[0]), np.maximum(b - 1, 0)], 0)
        rank -= below
        prefix = (prefix << np.uint64(bits)) | b.astype(np.uint64)
    return prefix, rounds
