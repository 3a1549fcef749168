#!/usr/bin/env python3
"""Helpers of the data-parallel tests (test/tools/data-parallel.test).

  dp_compare.py subset SRC_DIR DST_DIR ROWS     first ROWS rows of x/y_train
  dp_compare.py inf-row DIR ROW                 x_train.npy row ROW := inf
  dp_compare.py compare A.mcst B.mcst BAR [--parameters]
                                                every state (or only the
                                                parameters): rel err < BAR
  dp_compare.py csv A.csv B.csv BAR             losses and scales agree
"""
import struct
import sys
import zlib

import numpy as np

DTYPES = {0: np.float32, 1: np.float16, 3: np.int32, 4: np.int64, 5: np.bool_}


def read_mcst(path):
    """The state entries of a .mcst checkpoint (docs/runtime.md), by name."""
    data = open(path, "rb").read()
    assert data[:8] == b"MCSTATE\0" and data[-8:] == b"MCSTEND\0", path
    crc, = struct.unpack_from("<I", data, len(data) - 16)
    assert crc == zlib.crc32(data[:-16]) & 0xFFFFFFFF, path + ": bad CRC"
    count, = struct.unpack_from("<I", data, 16)
    meta, = struct.unpack_from("<Q", data, 24)
    off = 32 + meta
    out = {}
    for _ in range(count):
        n, = struct.unpack_from("<I", data, off)
        off += 4
        name = data[off:off + n].decode()
        off += n
        dtype, rank = struct.unpack_from("<BB", data, off)
        off += 4
        dims = struct.unpack_from("<%dq" % rank, data, off)
        off += 8 * rank
        size, = struct.unpack_from("<Q", data, off)
        off += 8
        raw = data[off:off + size]
        off += size
        if dtype in DTYPES:
            out[name] = np.frombuffer(raw, DTYPES[dtype]).reshape(dims)
    return out


def main():
    cmd = sys.argv[1]
    if cmd == "subset":
        src, dst, rows = sys.argv[2], sys.argv[3], int(sys.argv[4])
        for n in ("x_train", "y_train"):
            np.save("%s/%s.npy" % (dst, n), np.load("%s/%s.npy" % (src, n))[:rows])
    elif cmd == "inf-row":
        d, row = sys.argv[2], int(sys.argv[3])
        x = np.load(d + "/x_train.npy")
        x[row, 0] = np.inf
        np.save(d + "/x_train.npy", x)
    elif cmd == "compare":
        a, b, bar = read_mcst(sys.argv[2]), read_mcst(sys.argv[3]), float(sys.argv[4])
        assert sorted(a) == sorted(b), (sorted(a), sorted(b))
        names = sorted(a)
        if "--parameters" in sys.argv:
            # The step count and the loss scale exactly, then the weights.
            for n in ("optimizer.step", "loss_scale"):
                if n in a:
                    assert np.array_equal(a[n], b[n]), (n, a[n], b[n])
            names = [n for n in names if not n.startswith(("optimizer.", "loss_scale"))
                     and not n.endswith((".exp_avg", ".exp_avg_sq", ".momentum_buffer"))]
        worst = 0.0
        for name in names:
            x, y = a[name].astype(np.float64), b[name].astype(np.float64)
            assert np.all(np.isfinite(x)) and np.all(np.isfinite(y)), name
            ref = np.linalg.norm(y)
            err = np.linalg.norm(x - y) / (ref if ref > 0 else 1.0)
            worst = max(worst, err)
            if err >= bar:
                sys.exit("state %s: rel err %.3g >= %g" % (name, err, bar))
        print("worst rel err %.3g over %d states (bar %g)" % (worst, len(names), bar))
    elif cmd == "csv":
        import csv
        ra = list(csv.DictReader(open(sys.argv[2])))
        rb = list(csv.DictReader(open(sys.argv[3])))
        bar = float(sys.argv[4])
        assert len(ra) == len(rb), (len(ra), len(rb))
        worst = 0.0
        for p, q in zip(ra, rb):
            assert p["loss_scale"] == q["loss_scale"], (p, q)
            x, y = float(p["loss"]), float(q["loss"])
            if np.isfinite(y):
                worst = max(worst, abs(x - y) / abs(y))
            else:
                assert not np.isfinite(x), (p, q)
        if worst >= bar:
            sys.exit("loss rel err %.3g >= %g" % (worst, bar))
        print("%d steps: losses within %.3g, same loss scales" % (len(ra), worst))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
