"""HDF5 fixtures for tests/test_hdf5.c (src/core/hdf5.c, the bounded HDF5 reader).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/hdf5_fixtures.py
Writes tests/ref/hdf5/*.h5, each a few KB, and tests/ref/hdf5/expected.json: for every file
either what h5py reads in it (objects in the reader's order: depth-first, a group before its
members, members in bytewise name order; each dataset's dtype, shape and little-endian bytes
in hex; each attribute's strings, or null for a non-string attribute) or the error the
reader must give (code and a substring of the message). The files: Keras 3's own weights
file and legacy .h5 of a small model; h5py files covering every dtype (bfloat16 too),
scalar, empty, unwritten and compact datasets, string and numeric attributes, multi-level
B-trees (a small group K patched into the superblock), object header continuations, a user
block, libver='latest' (superblock 3, link messages); and refused or damaged files, some
made by patching bytes.
"""
import json
import os
import struct

import h5py
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hdf5")
EXPECTED = {}

DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "int8": "I8", "uint8": "U8",
          "int16": "I16", "uint16": "U16", "int32": "I32", "uint32": "U32", "int64": "I64",
          "uint64": "U64"}


def path_of(name):
    return os.path.join(OUT, name)


def attr_value(v):
    """The strings of a string attribute, else None."""
    a = np.asarray(v)
    if a.dtype.kind in "SUO":
        out = []
        for s in a.reshape(-1):
            if isinstance(s, bytes):
                s = s.split(b"\0")[0].decode("utf-8")
            out.append(str(s))
        return out
    return None


def describe(name):
    """What h5py reads in the file, in the reader's order."""
    objects = []
    with h5py.File(path_of(name), "r") as f:
        def walk(obj, path):
            entry = {"path": path, "attrs": {k: attr_value(obj.attrs[k]) for k in obj.attrs}}
            if isinstance(obj, h5py.Dataset):
                data = np.ascontiguousarray(obj[()])
                entry["dtype"] = DTYPES[data.dtype.name]
                entry["shape"] = list(obj.shape)
                entry["hex"] = data.astype(data.dtype.newbyteorder("<")).tobytes().hex()
            objects.append(entry)
            if isinstance(obj, h5py.Group):
                names = sorted((k for k in obj.keys()
                                if not isinstance(obj.get(k, getlink=True), h5py.SoftLink)),
                               key=lambda s: s.encode("utf-8"))
                for k in names:
                    walk(obj[k], k if not path else path + "/" + k)
        walk(f, "")
    EXPECTED[name] = {"objects": objects}


def expect_error(name, code, needle):
    EXPECTED[name] = {"error": code, "needle": needle}


def keras_files():
    import keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="dense"),
                              keras.layers.BatchNormalization(name="bn"),
                              keras.layers.Dense(2, name="out")])
    model.save_weights(path_of("keras3.weights.h5"))
    describe("keras3.weights.h5")
    model.save(path_of("keras_legacy.h5"))
    describe("keras_legacy.h5")


def types_file():
    name = "types.h5"
    with h5py.File(path_of(name), "w") as f:
        for i, dt in enumerate(DTYPES):
            info = np.iinfo(dt) if dt[0] in "iu" else None
            v = np.array([0, 1, 2, 3, 4, 5], dtype=dt) if info is None else \
                np.array([info.min, info.max, 0, 1, 2, 3], dtype=dt)
            if info is None:
                v = (v * 0.37 - 0.9).astype(dt)
            f.create_dataset("t/" + dt, data=v.reshape(2, 3))
        f["scalar"] = np.float32(2.5)
        f["model_weights/dense/dense/kernel:0"] = np.ones((2, 2), "f4")  # Keras 2's names
        f.create_dataset("empty", shape=(0, 3), dtype="f4")
        f.create_dataset("unwritten", shape=(2, 2), dtype="f4")
        f.create_dataset("rank8", data=np.arange(2 ** 8, dtype="u1").reshape((2,) * 8))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dset = h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_FLOAT,
                               h5py.h5s.create_simple((4,)), dcpl=dcpl)
        dset.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, -2, 3, -4], dtype="f4"))
        f.attrs["vlen"] = "a variable-length string"
        f.attrs["empty_vlen"] = ""
        f.attrs["utf8"] = "caf\u00e9 \u2713"
        f.attrs["fixed"] = np.array([b"ab", b"cde", b""], dtype="S4")
        f.attrs["fixed_scalar"] = np.bytes_(b"xyz")
        f.attrs.create("vlen_array", ["one", "two", "three"], dtype=h5py.string_dtype())
        f.attrs["number"] = 3
        f.attrs["floats"] = np.arange(4, dtype="f8")
        f["t"].attrs["name"] = "t"
    describe(name)


def bfloat16_file():
    """A 2-byte float type with bfloat16's fields (h5py reads it as float32, so the expected
    bytes are the raw ones written)."""
    name = "bfloat16.h5"
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_offset(0)
    t.set_precision(16)
    t.set_size(2)
    raw = np.array([0x3F80, 0xC000, 0x0000, 0x4049], dtype="<u2")  # 1, -2, 0, 3.14
    with h5py.File(path_of(name), "w") as f:
        d = h5py.h5d.create(f.id, b"bf16", t, h5py.h5s.create_simple((4,)))
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=t)
        assert np.allclose(f["bf16"][()], [1, -2, 0, 3.140625])
    EXPECTED[name] = {"objects": [
        {"path": "", "attrs": {}},
        {"path": "bf16", "attrs": {}, "dtype": "BF16", "shape": [4], "hex": raw.tobytes().hex()}]}


def many_members_file():
    """A root group whose v1 B-tree has several levels. h5py cannot set the group K, so the
    superblock of a new file is patched to K 2 (leaf and internal: 4 entries per symbol
    node, 4 children per B-tree node), which libhdf5 then uses when the file is reopened.
    Most members are soft links (cheap, not listed by the reader), a few are datasets."""
    name = "many.h5"
    with h5py.File(path_of(name), "w"):
        pass
    data = bytearray(open(path_of(name), "rb").read())
    data[16:20] = bytes([2, 0, 2, 0])
    open(path_of(name), "wb").write(bytes(data))
    with h5py.File(path_of(name), "r+") as f:
        for i in range(60):
            if i % 15 == 7:
                f["m%02d" % i] = np.int16(i)
                f["m%02d" % i].attrs["i"] = "member %d" % i
            else:
                f["m%02d" % i] = h5py.SoftLink("/m07")
    describe(name)


def continuation_file():
    """Attributes added one by one after the datasets: the object header grows by
    continuation blocks."""
    name = "continuation.h5"
    with h5py.File(path_of(name), "w") as f:
        g = f.create_group("g")
        g["x"] = np.arange(5, dtype="i2")
        for i in range(30):
            g.attrs["attr%02d" % i] = "value %d" % i if i % 2 else np.int32(i)
            f.attrs["root%02d" % i] = np.arange(i + 1, dtype="f4")
    describe(name)


def other_files():
    with h5py.File(path_of("userblock.h5"), "w", userblock_size=512) as f:
        f["x"] = np.arange(3, dtype="i4")
        f.attrs["s"] = "in a file with a user block"
    describe("userblock.h5")
    # A file moved behind 1024 bytes of something else: its base address still says 0, but
    # libhdf5 (and the reader) count addresses from the signature.
    with h5py.File(path_of("moved.h5"), "w") as f:
        f["x"] = np.arange(3, dtype="i2")
        f.attrs["s"] = "moved"
    data = open(path_of("moved.h5"), "rb").read()
    open(path_of("moved.h5"), "wb").write(b"#" * 1024 + data)
    describe("moved.h5")
    with h5py.File(path_of("latest.h5"), "w", libver="latest") as f:
        f["a/x"] = np.arange(3, dtype="f4")
        f["b"] = np.float64(-1.5)
        f["a"].attrs["name"] = "a"
        f.attrs["fixed"] = np.array([b"p", b"qq"], dtype="S3")
        f.attrs["n"] = 7
    describe("latest.h5")
    with h5py.File(path_of("latest_dense.h5"), "w", libver="latest") as f:
        for i in range(12):
            f["g%02d" % i] = np.int8(i)
    expect_error("latest_dense.h5", "FORMAT", "dense link storage")
    with h5py.File(path_of("chunked.h5"), "w") as f:
        f.create_group("layers/dense/vars")
        f.create_dataset("layers/dense/vars/0", data=np.zeros((4, 4), "f4"), chunks=(2, 2))
    expect_error("chunked.h5", "FORMAT",
                 "'layers/dense/vars/0': layout: chunked storage is not supported")
    with h5py.File(path_of("bigendian.h5"), "w") as f:
        f["be"] = np.arange(3, dtype=">f4")
    expect_error("bigendian.h5", "FORMAT", "'be': datatype: big-endian float data")
    with h5py.File(path_of("bool.h5"), "w") as f:
        f["flags"] = np.array([True, False])
    expect_error("bool.h5", "FORMAT", "'flags': datatype: enum data is not supported")
    with h5py.File(path_of("strings.h5"), "w") as f:
        f["s"] = np.array([b"a", b"b"])
    expect_error("strings.h5", "FORMAT", "'s': datatype: string data is not supported")
    with h5py.File(path_of("cycle.h5"), "w") as f:
        f.create_group("a/b")
        f["a/b/up"] = f["a"]
    expect_error("cycle.h5", "FORMAT", "reached twice")
    with h5py.File(path_of("deep.h5"), "w", libver="latest") as f:
        f.create_group("/".join(["g"] * 65))
    expect_error("deep.h5", "FORMAT", "groups nest deeper than 64")
    with open(path_of("not_hdf5.h5"), "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n" + bytes(600))
    expect_error("not_hdf5.h5", "USAGE", "not an HDF5 file")


def damaged_files():
    """Patched copies of the fixtures above."""
    src = open(path_of("keras3.weights.h5"), "rb").read()
    with open(path_of("truncated.h5"), "wb") as out:
        out.write(src[: len(src) // 2])
    expect_error("truncated.h5", "FORMAT", "truncated")

    # The contiguous address of 'x' (4 bytes of int32 [3]) moved past the end of the file.
    with h5py.File(path_of("userblock.h5"), "r") as f:
        offset = f["x"].id.get_offset()
    data = bytearray(open(path_of("userblock.h5"), "rb").read())
    rel = struct.pack("<Q", offset - 512)
    at = data.find(b"\x03\x01" + rel)  # layout message v3, contiguous, address
    assert at > 0
    data[at + 2: at + 10] = struct.pack("<Q", 1 << 40)
    with open(path_of("bad_address.h5"), "wb") as out:
        out.write(bytes(data))
    expect_error("bad_address.h5", "FORMAT", "'x': data: address 1099511627776")

    # Two B-tree children that are the same node (a DAG, as good as a cycle for a walker),
    # and a node that is its own child (the level check stops it).
    data = bytearray(open(path_of("many.h5"), "rb").read())
    root = data.find(b"TREE")
    level, entries = data[root + 5], struct.unpack("<H", data[root + 6: root + 8])[0]
    assert level >= 1 and entries >= 2, (level, entries)
    first = root + 24 + 8  # signature, type, level, entries, siblings; then key, child
    data[first + 16: first + 24] = data[first: first + 8]
    with open(path_of("btree_twice.h5"), "wb") as out:
        out.write(bytes(data))
    expect_error("btree_twice.h5", "FORMAT", "B-tree node at")
    data = bytearray(open(path_of("many.h5"), "rb").read())
    data[first: first + 8] = struct.pack("<Q", root)
    with open(path_of("btree_self.h5"), "wb") as out:
        out.write(bytes(data))
    expect_error("btree_self.h5", "FORMAT", "B-tree node at")


def main():
    os.makedirs(OUT, exist_ok=True)
    keras_files()
    types_file()
    bfloat16_file()
    many_members_file()
    continuation_file()
    other_files()
    damaged_files()
    with open(path_of("expected.json"), "w") as out:
        json.dump(EXPECTED, out, indent=1, sort_keys=True)
        out.write("\n")
    for name in sorted(os.listdir(OUT)):
        print("%-22s %6d bytes" % (name, os.path.getsize(path_of(name))))


if __name__ == "__main__":
    main()
