#!/usr/bin/env python3
"""Write the .npy fixtures of gsx's integration tests, with numpy's own results.

    python3 scripts/make_npy_fixtures.py crates/gsx/tests/fixtures

For each dtype family: data, indices, updates, and the expected output of each
op computed by numpy (take, take_along_axis, put_along_axis, advanced
indexing), so the tests compare gsx with an independent implementation. Also
a few files that exercise the reader: big-endian, Fortran order, a datetime
array (unsupported) and a truncated file.
"""

import os
import sys

import numpy as np

FAMILIES = {
    "bool": np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]]),
    "int8": np.arange(-6, 6, dtype=np.int8).reshape(3, 4),
    "int16": (np.arange(12, dtype=np.int16) * -300).reshape(3, 4),
    "int32": (np.arange(12, dtype=np.int32) * 100000 - 7).reshape(3, 4),
    "int64": (np.arange(12, dtype=np.int64) * (1 << 40) - 3).reshape(3, 4),
    "uint8": np.arange(250, 262, dtype=np.int64).astype(np.uint8).reshape(3, 4),
    "uint16": (np.arange(12, dtype=np.uint16) * 5000).reshape(3, 4),
    "uint32": (np.arange(12, dtype=np.uint32) * 300000000).reshape(3, 4),
    "uint64": (np.arange(12, dtype=np.uint64) * np.uint64(1 << 60)).reshape(3, 4),
    "float16": (np.arange(12, dtype=np.float16) / 3).reshape(3, 4),
    "float32": (np.arange(12, dtype=np.float32) * 1.5 - 4).reshape(3, 4),
    "float64": (np.arange(12, dtype=np.float64) / 7).reshape(3, 4),
    "complex64": (np.arange(12) + 1j * np.arange(12)[::-1]).astype(np.complex64).reshape(3, 4),
    "complex128": (np.arange(12) / 3 - 2j * np.arange(12)).astype(np.complex128).reshape(3, 4),
    "unicode": np.array([["a", "bb", "ccc", ""], ["é", "ünï", "ok", "x"], ["日本", "z", "yy", "q"]]),
}

GATHER_INDICES = np.array([[0, -1], [2, 1]], dtype=np.int64)  # axis 1
ELEMENTS_INDICES = np.array([[1, 0, 2, -1], [0, 0, 1, 2]], dtype=np.int32)  # axis 0
SCATTER_INDICES = np.array([[0, 3], [1, -2], [3, 0]], dtype=np.int64)  # axis 1, no duplicates
ND_INDICES = np.array([[0, 1], [2, -1]], dtype=np.int64)
SCATTER_ND_INDICES = np.array([[2], [0]], dtype=np.uint16)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "crates/gsx/tests/fixtures"
    for name, data in FAMILIES.items():
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "data.npy"), data)
        np.save(os.path.join(d, "gather_indices.npy"), GATHER_INDICES)
        np.save(os.path.join(d, "gather.npy"), np.take(data, GATHER_INDICES, axis=1))
        np.save(os.path.join(d, "elements_indices.npy"), ELEMENTS_INDICES)
        np.save(os.path.join(d, "gather_elements.npy"), np.take_along_axis(data, ELEMENTS_INDICES.astype(np.int64), axis=0))
        updates = data[:, ::-1][:, :2].copy()
        np.save(os.path.join(d, "scatter_indices.npy"), SCATTER_INDICES)
        np.save(os.path.join(d, "scatter_updates.npy"), updates)
        out = data.copy()
        np.put_along_axis(out, SCATTER_INDICES, updates, axis=1)
        np.save(os.path.join(d, "scatter_elements.npy"), out)
        np.save(os.path.join(d, "nd_indices.npy"), ND_INDICES)
        np.save(os.path.join(d, "gather_nd.npy"), data[ND_INDICES[:, 0], ND_INDICES[:, 1]])
        nd_updates = data[::-1][:2].copy()
        np.save(os.path.join(d, "scatter_nd_indices.npy"), SCATTER_ND_INDICES)
        np.save(os.path.join(d, "scatter_nd_updates.npy"), nd_updates)
        out = data.copy()
        for row, (i,) in enumerate(SCATTER_ND_INDICES):
            out[i] = nd_updates[row]
        np.save(os.path.join(d, "scatter_nd.npy"), out)

    # Duplicate-index reductions, computed with np.add.at / np.multiply.at etc.
    d = os.path.join(root, "reductions")
    os.makedirs(d, exist_ok=True)
    data = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    idx = np.array([[0, 0, 3], [1, 1, 1], [2, 0, 2]], dtype=np.int64)
    upd = (np.arange(9, dtype=np.float32).reshape(3, 3) - 3) / 2
    np.save(os.path.join(d, "data.npy"), data)
    np.save(os.path.join(d, "indices.npy"), idx)
    np.save(os.path.join(d, "updates.npy"), upd)
    rows = np.repeat(np.arange(3), 3).reshape(3, 3)
    for red, ufunc in (("add", np.add), ("mul", np.multiply), ("max", np.maximum), ("min", np.minimum)):
        out = data.copy()
        ufunc.at(out, (rows, idx), upd)
        np.save(os.path.join(d, f"{red}.npy"), out)

    d = os.path.join(root, "reader")
    os.makedirs(d, exist_ok=True)
    base = (np.arange(24, dtype=np.float64) * 1.25).reshape(2, 3, 4)
    np.save(os.path.join(d, "c_order.npy"), base)
    np.save(os.path.join(d, "big_endian.npy"), base.astype(">f8"))
    np.save(os.path.join(d, "fortran.npy"), np.asfortranarray(base))
    np.save(os.path.join(d, "big_endian_i32.npy"), np.arange(6, dtype=">i4").reshape(2, 3))
    np.save(os.path.join(d, "bytes.npy"), np.array([b"ab", b"c"]))
    np.save(os.path.join(d, "datetime.npy"), np.array(["2026-11-21"], dtype="datetime64[D]"))
    with open(os.path.join(d, "c_order.npy"), "rb") as f:
        whole = f.read()
    with open(os.path.join(d, "truncated.npy"), "wb") as f:
        f.write(whole[:-8])


if __name__ == "__main__":
    main()
