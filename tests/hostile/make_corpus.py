#!/usr/bin/env python3
"""Writes a corpus of malformed captures and parameter files, and a manifest of what sparge must say.

usage: make_corpus.py OUTDIR

Every case is a file plus the expected outcome of `sparge info` / `sparge run` (captures) or
`sparge run good.h5 --params FILE` (parameter files): the exit status (1 = a clear error; [0, 1] for
randomly corrupted files, where either a clean run or a clear error is right) and a piece of the message.
A crash, a hang or a sanitizer report is never right. Seeded: the same corpus on every run.
"""
import json
import os
import random
import sys

import h5py
import numpy as np

if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
    sys.exit(__doc__)
OUT = sys.argv[1]
CAPS = os.path.join(OUT, "captures")
PARAMS = os.path.join(OUT, "params")
os.makedirs(CAPS, exist_ok=True)
os.makedirs(PARAMS, exist_ok=True)
rng = np.random.default_rng(13)
manifest = []


def case(kind, name, expect, exit_codes=(1,), command="run"):
    manifest.append({"kind": kind, "file": name, "expect": expect, "exit": list(exit_codes), "command": command})


def tensors(h=2, hkv=2, n=96, d=32, dtype="f2"):
    q = rng.standard_normal((1, h, n, d)).astype(dtype)
    k = rng.standard_normal((1, hkv, n, d)).astype(dtype)
    v = rng.standard_normal((1, hkv, n, d)).astype(dtype)
    return q, k, v


def capture(name, build, expect, exit_codes=(1,), version=1, command="run"):
    """A capture holding one entry 'e0' (built by `build(group, file)`)."""
    path = os.path.join(CAPS, name)
    with h5py.File(path, "w") as f:
        if version is not None:
            f.attrs["sparge_capture_version"] = version
        build(f.create_group("entries/e0"), f)
    case("capture", name, expect, exit_codes, command)
    return path


def good(g, f=None, **kw):
    g["q"], g["k"], g["v"] = tensors(**kw)


def with_attr(key, value):
    def build(g, f):
        good(g)
        g.attrs[key] = value
    return build


def raw(name, data, expect, exit_codes=(1,)):
    with open(os.path.join(CAPS, name), "wb") as f:
        f.write(data)
    case("capture", name, expect, exit_codes)


# ---------------------------------------------------------------- not captures at all
raw("empty.h5", b"", "the file is empty")
raw("text.h5", b"not hdf5\n" * 10, "not an HDF5 file")
raw("signature_only.h5", b"\x89HDF\r\n\x1a\n" + bytes(rng.integers(0, 256, 2000, dtype=np.uint8)), "")
raw("zeros.h5", bytes(4096), "not an HDF5 file")

# ---------------------------------------------------------------- the root
capture("no_version.h5", good, "missing root attribute sparge_capture_version", version=None)
capture("version_2.h5", good, "unknown capture version 2", version=2)
capture("version_string.h5", good, "is not an integer", version="1")
capture("version_float.h5", good, "is not an integer", version=1.5)
capture("version_huge_float.h5", good, "is not an integer", version=1e300)
with h5py.File(os.path.join(CAPS, "no_entries.h5"), "w") as f:
    f.attrs["sparge_capture_version"] = 1
case("capture", "no_entries.h5", "no /entries group")
with h5py.File(os.path.join(CAPS, "entries_dataset.h5"), "w") as f:
    f.attrs["sparge_capture_version"] = 1
    f["entries"] = np.zeros(3)
case("capture", "entries_dataset.h5", "/entries is not a group")
with h5py.File(os.path.join(CAPS, "entries_empty.h5"), "w") as f:
    f.attrs["sparge_capture_version"] = 1
    f.create_group("entries")
case("capture", "entries_empty.h5", "no entries")
with h5py.File(os.path.join(CAPS, "entry_dataset.h5"), "w") as f:
    f.attrs["sparge_capture_version"] = 1
    f["entries/e0"] = np.zeros(3)
case("capture", "entry_dataset.h5", "not a group")

# ---------------------------------------------------------------- datasets and shapes
capture("missing_q.h5", lambda g, f: [g.__setitem__("k", tensors()[1]), g.__setitem__("v", tensors()[2])],
        "missing dataset q")
capture("q_group.h5", lambda g, f: [g.create_group("q"), g.__setitem__("k", tensors()[1]),
                                     g.__setitem__("v", tensors()[2])], "cannot open it as a dataset")


def shaped(qshape, dtype="f2", data=True, chunks=None, kv=None, **dskw):
    """q of `qshape`; k and v of shape `kv` (declared only, like q, when data=False) or random [1, 2, 96, 32]."""
    def build(g, f):
        _, k, v = tensors()
        if kv is not None:
            for name in ("k", "v"):
                g.create_dataset(name, shape=kv, dtype=dtype, chunks=tuple(min(c, 64) for c in kv))
            g.create_dataset("q", shape=qshape, dtype=dtype, chunks=chunks)
            return
        if data:
            g.create_dataset("q", data=np.ones(qshape, dtype), chunks=chunks, **dskw)
        else:
            g.create_dataset("q", shape=qshape, dtype=dtype, chunks=chunks, **dskw)
        g["k"], g["v"] = k, v
    return build


capture("rank3.h5", shaped((2, 96, 32)), "wrong rank 3")
capture("rank5.h5", shaped((1, 2, 96, 32, 1)), "wrong rank 5")
capture("rank0.h5", shaped(()), "wrong rank 0")
capture("zero_dim.h5", shaped((1, 2, 0, 32)), "zero-size dimension")
# The reported overflow: B·H·N·D wraps int64 (heap overflow in the loader on older builds). k and v
# agree with q where they must, so that only the size can be wrong.
capture("overflow_heads.h5", shaped((1, 2**58 + 1, 1, 64), data=False, chunks=(1, 1, 1, 64), kv=(1, 1, 1, 64)),
        "more than 2147483647")
capture("overflow_product.h5", shaped((1, 2**31 - 1, 2**31 - 1, 64), data=False, chunks=(1, 1, 1, 64),
                                      kv=(1, 1, 1, 64)), "more values than any machine can hold")
capture("overflow_batch.h5", shaped((2**62, 1, 1, 8), data=False, chunks=(1, 1, 1, 8), kv=(2**62, 1, 1, 8)),
        "more than 2147483647")
capture("tokens_2p31.h5", shaped((1, 1, 2**31, 1), data=False, chunks=(1, 1, 1024, 1), kv=(1, 1, 1, 1)),
        "more than 2147483647")
# Shapes that fit but hold no data: 4 GiB of q declared in a few KB (unallocated chunks read as zeros).
capture("declared_4gib.h5", shaped((1, 32, 2**20, 64), data=False, chunks=(1, 1, 1024, 64), kv=(1, 1, 1, 64)),
        "chunks were ever written")
capture("declared_2p31_tokens.h5", shaped((1, 1, 2**31 - 1, 1), data=False, chunks=(1, 1, 2**20, 1),
                                          kv=(1, 1, 1, 1)), "chunks were ever written")
capture("never_written_contiguous.h5", shaped((1, 2, 96, 32), data=False), "never written")


def half_written(g, f):
    q, k, v = tensors()
    d = g.create_dataset("q", shape=q.shape, dtype=q.dtype, chunks=(1, 1, 96, 32))
    d[0, 0] = q[0, 0]  # head 1 never written
    g["k"], g["v"] = k, v


capture("half_written.h5", half_written, "only 1 of its 2 chunks")
capture("chunk_bigger_than_data.h5", shaped((1, 2, 96, 32), chunks=(1, 4, 128, 32), maxshape=(None, None, None, 32)),
        "chunk shape does not fit")

# ---------------------------------------------------------------- dtypes
for dtype, label in (("f8", "float64"), ("i4", "int32"), ("u1", "uint8"), ("i8", "int64")):
    capture(f"dtype_{label}.h5", shaped((1, 2, 96, 32), dtype=dtype), f"unsupported dtype {label}")
capture("dtype_uint16_no_tag.h5", shaped((1, 2, 96, 32), dtype="u2"), "without the dataset attribute dtype")


def tagged(tag):
    def build(g, f):
        shaped((1, 2, 96, 32), dtype="u2")(g, f)
        g["q"].attrs["dtype"] = tag
    return build


capture("dtype_tag_wrong.h5", tagged("float8"), 'attribute dtype = "float8"')
capture("dtype_tag_number.h5", tagged(3), "attribute dtype is not a string")


def compound(g, f):
    g["q"] = np.zeros((1, 2, 96, 32), dtype=[("a", "f4"), ("b", "f4")])
    _, g["k"], g["v"] = tensors()


capture("dtype_compound.h5", compound, "unsupported dtype compound")


def strings(g, f):
    g["q"] = np.array([[[["x"] * 32] * 96] * 2], dtype="S4")
    _, g["k"], g["v"] = tensors()


capture("dtype_string.h5", strings, "unsupported dtype string")
capture("dtype_bool.h5", shaped((1, 2, 96, 32), dtype="?"), "unsupported dtype")


def mixed_dtypes(g, f):
    q, k, v = tensors()
    g["q"], g["k"], g["v"] = q, k.astype("f4"), v
capture("dtype_mixed.h5", mixed_dtypes, "dtype differs from q")

# ---------------------------------------------------------------- shapes that disagree
for label, kw, expect in (("batch", dict(kb=2), "mismatched batch"), ("dim", dict(kd=16), "mismatched head dim"),
                          ("heads", dict(vh=1), "mismatched heads"), ("tokens", dict(vn=50), "mismatched tokens"),
                          ("gqa", dict(kh=3, vh=3), "not a multiple")):
    def build(g, f, kw=kw):
        g["q"] = np.ones((1, 4, 96, 32), "f2")
        g["k"] = np.ones((kw.get("kb", 1), kw.get("kh", 2), 96, kw.get("kd", 32)), "f2")
        g["v"] = np.ones((1, kw.get("vh", kw.get("kh", 2)), kw.get("vn", 96), 32), "f2")
    capture(f"mismatch_{label}.h5", build, expect)

# ---------------------------------------------------------------- entry attributes
for key, value, expect in (
        ("causal", 1e300, "not a single integer"), ("causal", -7, "causal = -7"), ("causal", 2, "causal = 2"),
        ("causal", "yes", "not a single integer"), ("causal", np.array([1, 1]), "not a single integer"),
        ("causal", 0.5, "not a single integer"), ("causal", float("nan"), "not a single integer"),
        ("layer", 1e300, "not a single integer"), ("layer", -1, "layer = -1"), ("layer", 1.5, "not a single integer"),
        ("layer", "3", "not a single integer"), ("layer", -9.3e18, "not a single integer"),
        ("step", -2, "step = -2"), ("step", 2.0**63, "not a single integer"),
        ("scale", 0.0, "scale = 0"), ("scale", -1.0, "scale = -1"), ("scale", float("inf"), "scale = inf"),
        ("scale", float("nan"), "scale = nan"), ("scale", "x", "not a single number"),
        ("layout", "XYZ", 'layout = "XYZ"'), ("layout", 3, "layout is not a string"),
        ("window", np.array([0, 2**63 - 1], dtype=np.int64), "reaches beyond 2147483647"),
        ("window", np.array([2**62, 0], dtype=np.int64), "reaches beyond 2147483647"),
        ("window", np.array([-5, 0], dtype=np.int64), "below -1"),
        ("window", np.array([1, 2, 3], dtype=np.int64), "exactly two values"),
        ("window", 1.5, "not an integer array")):
    label = f"attr_{key}_{str(value).replace('.', 'p').replace(' ', '')[:12]}"
    label = "".join(c if c.isalnum() or c in "_-" else "_" for c in label)
    capture(label + ".h5", with_attr(key, value), expect)

# ---------------------------------------------------------------- compression filters this build lacks
capture("filter_lzf.h5", shaped((1, 2, 96, 32), chunks=(1, 1, 96, 32), compression="lzf"), "(lzf, filter id 32000)")
for fid, label in ((32001, "blosc"), (32004, "lz4"), (32015, "zstd"), (32008, "bitshuffle"), (307, "bzip2")):
    capture(f"filter_{label}.h5", shaped((1, 2, 96, 32), data=False, chunks=(1, 1, 96, 32), compression=fid,
                                         allow_unknown_filter=True), f"({label}, filter id {fid})")

# ---------------------------------------------------------------- data or objects in other files
fifo = os.path.join(CAPS, "a_fifo")
if not os.path.exists(fifo):
    os.mkfifo(fifo)
other = os.path.join(CAPS, "other.h5")
with h5py.File(other, "w") as f:
    f["q"] = np.ones((1, 2, 96, 32), "f2")
    f.create_group("entries/e0")
    good(f["entries/e0"])


def external_link(target_file, target_path, where="q"):
    def build(g, f):
        q, k, v = tensors()
        if where != "q":
            g["q"] = q
        g["k"], g["v"] = k, v
        g[where] = h5py.ExternalLink(target_file, target_path)
    return build


capture("extlink_q.h5", external_link("other.h5", "/q"), "external link to another file")
capture("extlink_q_fifo.h5", external_link(fifo, "/q"), "external link to another file")
capture("extlink_q_dev_zero.h5", external_link("/dev/zero", "/q"), "external link to another file")


def extlink_entries(g, f):
    del f["entries"]
    f["entries"] = h5py.ExternalLink("other.h5", "/entries")


capture("extlink_entries.h5", extlink_entries, "external link to another file")


def extlink_entry(g, f):
    f["entries/e1"] = h5py.ExternalLink(fifo, "/entries/e0")
    good(g)


capture("extlink_entry_fifo.h5", extlink_entry, "external link to another file")


def soft_to_external(g, f):
    q, k, v = tensors()
    g["k"], g["v"] = k, v
    f["elsewhere"] = h5py.ExternalLink(fifo, "/x")
    g["q"] = h5py.SoftLink("/elsewhere/q")


capture("softlink_through_extlink.h5", soft_to_external, "")


def external_storage(target):
    def build(g, f):
        q, k, v = tensors()
        g.create_dataset("q", shape=q.shape, dtype=q.dtype, external=[(target, 0, q.nbytes)])
        g["k"], g["v"] = k, v
    return build


capture("external_storage_dev_zero.h5", external_storage("/dev/zero"), "kept in other files")
capture("external_storage_fifo.h5", external_storage(fifo), "kept in other files")
capture("external_storage_passwd.h5", external_storage("/etc/passwd"), "kept in other files")


def virtual(g, f):
    q, k, v = tensors()
    layout = h5py.VirtualLayout(shape=(1, 2, 96, 32), dtype="f2")
    layout[...] = h5py.VirtualSource(other, "q", shape=(1, 2, 96, 32))
    g.create_virtual_dataset("q", layout)
    g["k"], g["v"] = k, v


capture("virtual_q.h5", virtual, "kept in other files")


def soft_cycle(g, f):
    good(g)
    f["entries/loop"] = h5py.SoftLink("/entries")


capture("softlink_cycle.h5", soft_cycle, "/entries/loop")


def soft_dangling(g, f):
    _, k, v = tensors()
    g["k"], g["v"] = k, v
    g["q"] = h5py.SoftLink("/nowhere/q")


capture("softlink_dangling.h5", soft_dangling, "")

# ---------------------------------------------------------------- attacks on the HDF5 library itself
# HDF5 1.10 copies a global-heap object (the text of a variable-length string) with the size stored in
# the file: a huge size overflows its buffer. Such files must end in an error, not a crash.
def heap_object_size(name, where, size):
    path = os.path.join(CAPS, name)
    with h5py.File(path, "w") as f:
        f.attrs["sparge_capture_version"] = 1
        g = f.create_group("entries/e0")
        good(g)
        (f if where == "root" else g).attrs["model" if where == "root" else "layout"] = "HND text"
    data = bytearray(open(path, "rb").read())
    heap = data.find(b"GCOL")
    assert heap > 0, "no global heap in " + name
    # collection: signature, version, 3 reserved, size (8); object 1: index, refcount, 4 reserved, size (8)
    data[heap + 24:heap + 32] = size.to_bytes(8, "little")
    open(path, "wb").write(bytes(data))
    case("capture", name, "the HDF5 library crashed reading the file's structure")


heap_object_size("heap_overflow_root_attr.h5", "root", 0x2000000000000004)
heap_object_size("heap_overflow_entry_attr.h5", "entry", 0x7FFFFFFFFFFFFFF0)

# ---------------------------------------------------------------- damaged copies of a good capture
base = os.path.join(OUT, "good.h5")
with h5py.File(base, "w") as f:
    f.attrs["sparge_capture_version"] = 1
    for i in range(2):
        g = f.create_group(f"entries/l{i}")
        g.attrs["causal"] = i
        q, k, v = tensors(h=4, hkv=2, n=200, d=32)
        g.create_dataset("q", data=q, chunks=(1, 1, 200, 32), compression="gzip")
        g.create_dataset("k", data=k, chunks=(1, 1, 200, 32), compression="gzip")
        g.create_dataset("v", data=v)
good_bytes = open(base, "rb").read()
rand = random.Random(7)
for i in range(16):
    cut = rand.randrange(64, len(good_bytes) - 1)
    raw(f"truncated_{i:02d}.h5", good_bytes[:cut], "")
for i in range(24):
    data = bytearray(good_bytes)
    for _ in range(rand.choice((1, 4, 32))):
        pos = rand.randrange(0, len(data))
        data[pos] ^= 1 << rand.randrange(8)
    raw(f"bitflip_{i:02d}.h5", bytes(data), "", exit_codes=(0, 1))

# ---------------------------------------------------------------- parameter files
GOOD_PARAMS = {
    "sparge_params_version": 1, "mode": "cdf", "l1": 0.05, "l2": 0.06, "geometry": "128x64",
    "smooth_k": True, "sink": False,
    "groups": [{"name": "l0", "entries": ["l0"], "layer": None, "heads_q": 4, "complete": True,
                "heads": [{"head": h, "is_sparse": True, "simthreshd1": 0.5, "cdfthreshd": 0.9,
                           "pvthreshd": 10.0} for h in range(4)]}],
}


def params(name, text, expect, exit_codes=(1,)):
    with open(os.path.join(PARAMS, name), "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)
    case("params", name, expect, exit_codes)


def mutated(name, mutate, expect, exit_codes=(1,)):
    p = json.loads(json.dumps(GOOD_PARAMS))
    mutate(p)
    params(name, json.dumps(p), expect, exit_codes)


def head0(p):
    return p["groups"][0]["heads"][0]


params("ok.json", json.dumps(GOOD_PARAMS), "", exit_codes=(0,))
params("empty.json", "", "not valid JSON")
params("not_json.json", "{groups: }", "not valid JSON")
params("l1_1e400.json", json.dumps(GOOD_PARAMS).replace('"l1": 0.05', '"l1": 1e400'), "not valid JSON")
params("theta_minus_1e400.json", json.dumps(GOOD_PARAMS).replace('"simthreshd1": 0.5', '"simthreshd1": -1e400', 1),
       "not valid JSON")
params("nan_literal.json", json.dumps(GOOD_PARAMS).replace('"l2": 0.06', '"l2": NaN'), "not valid JSON")
params("top_array.json", "[1, 2]", "expected a JSON object at the top level")
params("deep_nesting.json", "[" * 100000 + "]" * 100000, "")
params("invalid_utf8.json", '{"sparge_params_version": 1, "mode": "cdf\udcff"}', "not valid JSON")
params("bom.json", "\ufeff" + json.dumps(GOOD_PARAMS), "", exit_codes=(0, 1))
mutated("l1_string.json", lambda p: p.update(l1="0.05"), "/l1: expected a number, got string")
mutated("version_2.json", lambda p: p.update(sparge_params_version=2), "unsupported version 2")
mutated("version_wraps.json", lambda p: p.update(sparge_params_version=2**32 + 1), "unsupported version 4294967297")
mutated("version_u64.json", lambda p: p.update(sparge_params_version=2**64 - 1), "integer out of range")
mutated("mode_bad.json", lambda p: p.update(mode="dense"), 'unknown mode "dense"')
mutated("geometry_bad.json", lambda p: p.update(geometry="32x32"), "/geometry")
mutated("missing_groups.json", lambda p: p.pop("groups"), 'missing key "groups"')
mutated("heads_q_float.json", lambda p: p["groups"][0].update(heads_q=4.5), "expected an integer, got number")
mutated("heads_q_negative.json", lambda p: p["groups"][0].update(heads_q=-4), "must be positive")
mutated("heads_q_u64.json", lambda p: p["groups"][0].update(heads_q=2**64 - 1), "integer out of range")
mutated("head_string.json", lambda p: head0(p).update(head="0"), "expected an integer, got string")
mutated("head_out_of_range.json", lambda p: head0(p).update(head=7), "out of range")
mutated("head_duplicate.json", lambda p: p["groups"][0]["heads"][1].update(head=0), "duplicate head 0")
mutated("is_sparse_int.json", lambda p: head0(p).update(is_sparse=1), "expected true or false")
mutated("tau_above_1.json", lambda p: head0(p).update(cdfthreshd=1.5), "must be in [0, 1]")
mutated("lambda_negative.json", lambda p: head0(p).update(pvthreshd=-1), "must be >= 0")
mutated("topk_in_cdf.json", lambda p: head0(p).update(topk=0.5), "must not hold")
mutated("group_name_dup.json", lambda p: p["groups"].append(json.loads(json.dumps(p["groups"][0]))),
        "duplicate group name")
mutated("entries_empty.json", lambda p: p["groups"][0].update(entries=[]), "non-empty array")
mutated("complete_but_missing.json", lambda p: p["groups"][0]["heads"].pop(), "partial file must say")
mutated("complete_string.json", lambda p: p.update(complete="no"), "expected true or false")
mutated("heads_q_mismatch.json", lambda p: p["groups"][0].update(heads_q=8, complete=False),
        "was tuned for 8 query heads")
mutated("no_group_for_entry.json", lambda p: p["groups"][0].update(entries=["zz"], name="zz"),
        'no parameters for entry "l0"')
mutated("unknown_keys_ignored.json", lambda p: p.update(extra={"x": [1, 2]}), "", exit_codes=(0,))
mutated("entry_in_two_groups.json",
        lambda p: p["groups"].append(dict(json.loads(json.dumps(p["groups"][0])), name="again")),
        'is listed in group "l0" and in group "again"')
mutated("head_numerics_bad.json", lambda p: head0(p).update(numerics="fp4"), "/numerics")
mutated("head_numerics_quantized_in_exact_file.json", lambda p: head0(p).update(numerics="int8-fp8"),
        'may only differ by being "none"')
mutated("exact_fallback_bad.json", lambda p: p.update(exact_fallback="model"), "/exact_fallback")
mutated("tuned_on_object.json", lambda p: p["groups"][0].update(tuned_on={"capture": "a.h5"}),
        "/tuned_on: expected a non-empty array")
mutated("tuned_on_foreign.json",
        lambda p: p["groups"][0].update(tuned_on=[{"capture": "a.h5", "entry": "l0", "digest": "0" * 16}]),
        "--params-any-capture")
mutated("held_out_violations.json",
        lambda p: head0(p).update(held_out={"inputs": 1, "violations": 3, "max_l1": 0.1, "max_l1_entry": "x"}),
        "must be in [0, inputs]")

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print(f"{sum(m['kind'] == 'capture' for m in manifest)} captures, "
      f"{sum(m['kind'] == 'params' for m in manifest)} parameter files in {OUT}")
