# Writes corrupted variants of a .mcpk: corrupt.py GOOD.mcpk OUTDIR
import struct
import sys

good = open(sys.argv[1], "rb").read()
out = sys.argv[2]
table_end = 4 + struct.unpack_from("<I", good, 0)[0]


def write(name, data):
    open(f"{out}/{name}.mcpk", "wb").write(bytes(data))


def flip(pos):
    d = bytearray(good)
    d[pos] ^= 0x10
    return d


write("truncated-half", good[: len(good) // 2])
write("truncated-8", good[:8])
write("truncated-tail", good[:-1])
write("empty", b"")
write("flip-table", flip(table_end // 2))
write("flip-weights", flip(len(good) - 16 - 20))
write("flip-trailer", flip(len(good) - 12))
z = bytearray(good)
z[16:80] = bytes(64)
write("zero-range", z)
write("not-an-artifact", b"\x93NUMPY" + bytes(200))
