#!/usr/bin/env python3
# Writes the zip fixtures of tests/test_zip.c with Python's zipfile (and, for the zip64 end
# records, which zipfile writes only past 65535 entries or 4 GiB, by hand; zipfile reads that
# one back as a check). Every timestamp is 1980-01-01, so the files are the same at every run.
# Not run by `make test`; the files it wrote are committed beside it. To regenerate:
#   python3 tests/ref/zip/make.py
# The entries' contents, which the test rebuilds:
#   config.json  CONFIG below
#   lines.txt    "tfc zip fixture line 0\n" ... "line 199\n" (deflates about 10:1)
#   empty.bin    no bytes; dir/ a directory entry
# Good archives: stored.zip, deflated.zip (mixed methods), comment.zip, zip64_local.zip
# (force_zip64: a zip64 extra field in the local header), zip64.zip (zip64 extra fields in
# the central directory and the zip64 end record and locator), empty.zip (no entries).
# Damaged ones, each one byte-level edit of a good one (see the comment at each).
import os
import struct
import sys
import zipfile

OUT = os.path.dirname(os.path.abspath(__file__))
CONFIG = b'{"class_name": "Sequential", "config": {"name": "fixture"}}'
LINES = b"".join(b"tfc zip fixture line %d\n" % i for i in range(200))
DATE = (1980, 1, 1, 0, 0, 0)


def info(name, method=zipfile.ZIP_STORED):
    zi = zipfile.ZipInfo(name, DATE)
    zi.compress_type = method
    zi.external_attr = 0o644 << 16
    return zi


def build(path, entries, comment=b"", force_zip64=False):
    """entries: (name, bytes, method); a name ending in '/' is a directory."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, method in entries:
            zi = info(name, method)
            if name.endswith("/"):
                zi.external_attr = (0o40755 << 16) | 0x10
            if force_zip64:
                with zf.open(zi, "w", force_zip64=True) as f:
                    f.write(data)
            else:
                zf.writestr(zi, data)
        zf.comment = comment
    with open(path, "rb") as f:
        return bytearray(f.read())


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes(data))


def eocd(b):
    return b.rindex(b"PK\x05\x06")


def central(b, k):
    """Offset of the k-th central directory entry."""
    pos = struct.unpack_from("<I", b, eocd(b) + 16)[0]
    for _ in range(k):
        n, x, c = struct.unpack_from("<HHH", b, pos + 28)
        pos += 46 + n + x + c
    assert b[pos:pos + 4] == b"PK\x01\x02"
    return pos


def local(b, k):
    return struct.unpack_from("<I", b, central(b, k) + 42)[0]


def data_at(b, k):
    lh = local(b, k)
    n, x = struct.unpack_from("<HH", b, lh + 26)
    return lh + 30 + n + x


def zip64(path, entries):
    """An archive with every size and offset in zip64 extra fields and zip64 end records."""
    out, cd = bytearray(), bytearray()
    for name, data, method in entries:
        name = name.encode()
        comp = data
        if method == zipfile.ZIP_DEFLATED:
            import zlib
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            comp = c.compress(data) + c.flush()
        crc = zipfile.crc32(data) & 0xFFFFFFFF
        lho = len(out)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(comp))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0x21, crc,
                           0xFFFFFFFF, 0xFFFFFFFF, len(name), len(extra)) + name + extra + comp
        extra = struct.pack("<HHQQQ", 1, 24, len(data), len(comp), lho)
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, method, 0, 0x21, crc,
                          0xFFFFFFFF, 0xFFFFFFFF, len(name), len(extra), 0, 0, 0, 0o644 << 16,
                          0xFFFFFFFF) + name + extra
    cd_off, n = len(out), len(entries)
    out += cd
    e64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(cd), cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, e64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)
    with zipfile.ZipFile(path) as zf:  # Python itself must read it
        assert zf.testzip() is None
        assert [zf.read(name) for name, _, _ in entries] == [d for _, d, _ in entries]
    return out


def main():
    S, D = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
    tmp = os.path.join(OUT, ".tmp.zip")
    stored = build(tmp, [("config.json", CONFIG, S), ("empty.bin", b"", S), ("dir/", b"", S)])
    write("stored.zip", stored)
    deflated = build(tmp, [("lines.txt", LINES, D), ("config.json", CONFIG, S),
                           ("empty.bin", b"", D)])
    write("deflated.zip", deflated)
    write("comment.zip", build(tmp, [("config.json", CONFIG, D)],
                               comment=b"made by tests/ref/zip/make.py"))
    write("zip64_local.zip", build(tmp, [("lines.txt", LINES, D)], force_zip64=True))
    zip64(tmp, [("lines.txt", LINES, D), ("config.json", CONFIG, S)])
    os.replace(tmp, os.path.join(OUT, "zip64.zip"))
    write("empty.zip", build(tmp, []))
    os.remove(tmp)

    # cut in half: no end record, but it starts like a zip archive
    write("truncated.zip", deflated[:len(deflated) // 2])
    # one byte of config.json's stored data changed
    b = bytearray(stored)
    b[data_at(b, 0) + 2] ^= 0x20
    write("bad_crc.zip", b)
    # the local header of config.json calls it conf1g.json
    b = bytearray(stored)
    b[local(b, 0) + 30 + 4] = ord("1")
    write("bad_local_name.zip", b)
    # the local header of lines.txt says stored, the central directory deflate
    b = bytearray(deflated)
    struct.pack_into("<H", b, local(b, 0) + 8, 0)
    write("bad_local_method.zip", b)
    # lines.txt declares 1000 bytes (both headers) but inflates to 4890: a zip bomb's shape
    b = bytearray(deflated)
    struct.pack_into("<I", b, local(b, 0) + 22, 1000)
    struct.pack_into("<I", b, central(b, 0) + 24, 1000)
    write("bomb.zip", b)
    # lines.txt declares 4 GiB - 16 bytes, more than 470 bytes of deflate data can hold
    b = bytearray(deflated)
    struct.pack_into("<I", b, local(b, 0) + 22, 0xFFFFFFF0)
    struct.pack_into("<I", b, central(b, 0) + 24, 0xFFFFFFF0)
    write("huge.zip", b)
    # lines.txt declares 100 bytes more than it inflates to
    b = bytearray(deflated)
    struct.pack_into("<I", b, local(b, 0) + 22, len(LINES) + 100)
    struct.pack_into("<I", b, central(b, 0) + 24, len(LINES) + 100)
    write("short.zip", b)
    # the deflate data of lines.txt damaged (a block type of 3 is invalid)
    b = bytearray(deflated)
    b[data_at(b, 0)] |= 0x06
    write("bad_deflate.zip", b)
    # config.json flagged encrypted (bit 0 of the flags, both headers)
    b = bytearray(stored)
    struct.pack_into("<H", b, local(b, 0) + 6, 1)
    struct.pack_into("<H", b, central(b, 0) + 8, 1)
    write("encrypted.zip", b)
    # config.json compressed with bzip2 (method 12)
    write("bzip2.zip", build(tmp, [("config.json", CONFIG, zipfile.ZIP_BZIP2)]))
    os.remove(tmp)
    # the end record says this is disk 2 of a spanned archive
    b = bytearray(stored)
    struct.pack_into("<H", b, eocd(b) + 4, 1)
    write("multidisk.zip", b)
    # the central directory offset points past the end record
    b = bytearray(stored)
    struct.pack_into("<I", b, eocd(b) + 16, len(b))
    write("bad_cd_offset.zip", b)
    # config.json twice (zipfile warns, and writes it)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write("duplicate.zip", build(tmp, [("config.json", CONFIG, S), ("config.json", b"{}", S)]))
    os.remove(tmp)
    write("not_zip.txt", b"name: not a zip archive\n")
    print("wrote", len([f for f in os.listdir(OUT) if not f.endswith(".py")]), "files to", OUT)


if __name__ == "__main__":
    sys.exit(main())
