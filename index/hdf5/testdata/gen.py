# Writes the HDF5 fixtures of this directory with h5py (libver='latest':
# superblock v3, v2 object headers, dense groups, layout-4 and -5 chunk
# indexes) and EXPECTED.json: per file, every dataset path as h5py lists
# it (each link of each group followed, so a dataset linked under two
# names is listed twice), its dtype, shape and the sha256 of its C-order
# little-endian bytes as h5py reads them. Run in the Debian sid chroot
# (h5py 3.16, HDF5 2.2):
#   bash ../shared/tools/debian.sh sid /work/sid run python3 /out/gen.py /out/h5
# (copy gen.py to /work/sid/out first), then copy /work/sid/out/h5/* here.
# The .h5 files are written gzipped (NAME.h5.gz; the tests inflate them).
import gzip, hashlib, json, os, sys
import numpy as np
import h5py

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(37)


def arr(shape, dt="float32"):
    n = int(np.prod(shape))
    if np.dtype(dt).kind == "f":
        return rng.standard_normal(n).astype(dt).reshape(shape)
    return rng.integers(-100, 100, n).astype(dt).reshape(shape)


def dense(path):
    # Dense groups: 40 layers under "layers" (a group with more than 8
    # links is stored in a fractal heap with a v2 B-tree name index);
    # "many": 100 hard links to 5 datasets; "ordered": track_order=True
    # (a creation-order index beside the name index); "huge": a link
    # whose name (5000 bytes) makes its link message a huge heap object.
    with h5py.File(path, "w", libver="latest") as f:
        layers = f.create_group("layers")
        for i in range(40):
            layers.create_dataset(f"layer_{i:02d}", data=arr((2,)))
        many = f.create_group("many")
        targets = [f.create_dataset(f"t{k}", data=arr((k + 1,), "int16")) for k in range(5)]
        for i in range(100):
            many[f"link_{(i * 37) % 100:03d}"] = targets[i % 5]
        ordered = f.create_group("ordered", track_order=True)
        for name in ["zeta", "alpha", "mid", "beta", "omega", "gamma", "delta", "eps", "kappa", "iota", "theta", "nu"]:
            ordered.create_dataset(name, data=arr((2,), "float64"))
        huge = f.create_group("huge")
        for i in range(9):
            huge[f"h{i}"] = targets[i % 5]
        huge["n" * 5000] = targets[0]
        soft = f.create_group("soft")
        for i in range(9):
            soft[f"s{i}"] = targets[1]
        soft["dangling"] = h5py.SoftLink("/nowhere")


def deep(path):
    # A dense group whose heap outgrows the direct rows of its root
    # indirect block (512 KiB of link messages of 3 KB: 200 links with
    # 3000-byte names), so that its last links lie in a nested indirect
    # block. Its listing is in EXPECTED.json as one digest.
    with h5py.File(path, "w", libver="latest") as f:
        t = f.create_dataset("t", data=arr((3,), "int16"))
        g = f.create_group("deep")
        for i in range(200):
            g[f"{i:03d}" + "x" * 3000] = t


def chunks114(path):
    # Filtered datasets with each chunk index as HDF5 1.10 to 1.14 write
    # them (layout version 4: filtered chunk sizes in as few bytes as the
    # chunk needs; HDF5 2's version 5 uses 8).
    kw = {"compression": "gzip", "shuffle": True}
    with h5py.File(path, "w", libver=("v110", "v114")) as f:
        f.create_dataset("single", data=arr((6, 5)), chunks=(6, 5), **kw)
        f.create_dataset("farray", data=arr((20, 7)), chunks=(8, 3), **kw)
        f.create_dataset("earray", data=arr((41, 5)), chunks=(4, 5), maxshape=(None, 5), **kw)
        f.create_dataset("btree2", data=arr((10, 9), "float16"), chunks=(3, 2), maxshape=(None, None), **kw)


def eapaged(path):
    # An extensible array whose data blocks are paged (over 1024
    # elements: super block 13 on, past element 131060), written sparsely
    # so that the file stays small: 2000 chunks from element 132560,
    # over the second page of the super block's first data block and
    # both pages of its second; its first page is never initialised.
    # EXPECTED.json has the chunks stored and the sha256 of their bytes.
    with h5py.File(path, "w", libver="latest") as f:
        d = f.create_dataset("ea", shape=(135300,), maxshape=(None,), chunks=(1,), dtype="int8")
        d[132560:134560] = arr((2000,), "int8")


def chunks(path):
    # Chunked datasets with each layout-4 chunk index, unfiltered, gzip,
    # and gzip with shuffle; shapes that leave partial edge chunks.
    filt = {"plain": {}, "gzip": {"compression": "gzip"}, "gzshuf": {"compression": "gzip", "shuffle": True}}
    with h5py.File(path, "w", libver="latest") as f:
        for fn, kw in filt.items():
            # single chunk: chunks == shape, fixed max shape
            f.create_dataset(f"single/{fn}", data=arr((6, 5)), chunks=(6, 5), **kw)
            # fixed array: fixed max shape, several chunks
            f.create_dataset(f"farray/{fn}", data=arr((20, 7)), chunks=(8, 3), **kw)
            # extensible array: one unlimited dimension (the first, then the second)
            f.create_dataset(f"earray/{fn}", data=arr((41, 5)), chunks=(4, 5), maxshape=(None, 5), **kw)
            f.create_dataset(f"earray1/{fn}", data=arr((7, 9), "int32"), chunks=(3, 2), maxshape=(7, None), **kw)
            # v2 B-tree: two unlimited dimensions
            f.create_dataset(f"btree2/{fn}", data=arr((10, 9), "float16"), chunks=(3, 2), maxshape=(None, None), **kw)
        # many chunks: a paged fixed array (over 1024 chunks), an
        # extensible array with super blocks, a v2 B-tree of two levels
        f.create_dataset("farray/paged", data=arr((1100,), "int8"), chunks=(1,))
        f.create_dataset("earray/many", data=arr((301,), "int8"), chunks=(1,), maxshape=(None,))
        f.create_dataset("earray1/many", data=arr((2, 150), "int8"), chunks=(2, 1), maxshape=(2, None))
        f.create_dataset("btree2/many", data=arr((30, 31), "int8"), chunks=(1, 3), maxshape=(None, None))
        # max shape larger than the shape (fixed array indexed by the max shape)
        d = f.create_dataset("farray/grown", shape=(10, 4), maxshape=(20, 4), chunks=(3, 4), dtype="float32")
        d[...] = arr((10, 4))
        # implicit index: early allocation, no filters
        space = h5py.h5s.create_simple((9, 10))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4, 3))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_obj_track_times(False)  # as h5py's own create_dataset: the same bytes on every run
        g = f.create_group("implicit")
        dsid = h5py.h5d.create(g.id, b"plain", h5py.h5t.NATIVE_FLOAT, space, dcpl=dcpl)
        h5py.Dataset(dsid)[...] = arr((9, 10))
        # a chunk never written: listed as unserved
        d = f.create_dataset("missing/farray", shape=(10,), chunks=(5,), dtype="float32")
        d[:5] = 1


def walk(g, prefix, out):
    for name in g:  # h5py's order: by name, or creation order with track_order
        lk = g.get(name, getlink=True)
        p = prefix + name
        if not isinstance(lk, h5py.HardLink):
            out.setdefault("links", []).append(p)
            continue
        o = g[name]
        if isinstance(o, h5py.Group):
            walk(o, p + "/", out)
        else:
            a = np.ascontiguousarray(o[()])
            a = a.astype(a.dtype.newbyteorder("<"))
            out.setdefault("datasets", {})[p] = {"dtype": str(a.dtype), "shape": list(a.shape),
                                                 "sha256": hashlib.sha256(a.tobytes()).hexdigest()}


expected = {}
for name, fn in [("dense.h5", dense), ("deep.h5", deep), ("chunks.h5", chunks), ("chunks114.h5", chunks114), ("eapaged.h5", eapaged)]:
    p = os.path.join(out, name)
    fn(p)
    e = {"h5py": h5py.version.version, "hdf5": h5py.version.hdf5_version}
    with h5py.File(p, "r") as f:
        walk(f, "", e)
    if name == "eapaged.h5":
        with h5py.File(p, "r") as f:
            d = f["ea"]
            e["stored"] = {"ea": {"first": 132560, "chunks": d.id.get_num_chunks(),
                                  "sha256": hashlib.sha256(d[132560:134560].tobytes()).hexdigest()}}
    if name == "deep.h5":  # 200 names of 3 KB: one digest of "path\tshape\tsha256\n" lines, sorted
        lines = "".join(f"{p}\t{d['shape']}\t{d['sha256']}\n" for p, d in sorted(e.pop("datasets").items()))
        e["listing_sha256"] = hashlib.sha256(lines.encode()).hexdigest()
    expected[name] = e
for name in expected:  # committed gzipped (the tests inflate them)
    p = os.path.join(out, name)
    with open(p, "rb") as fh, gzip.GzipFile(p + ".gz", "wb", 9, mtime=0) as z:
        z.write(fh.read())
    os.remove(p)
with open(os.path.join(out, "EXPECTED.json"), "w") as fh:
    json.dump(expected, fh, indent=1, sort_keys=True)
    fh.write("\n")
