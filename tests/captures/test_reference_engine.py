"""The reference engine (sparge_capture.reference) against hand-made cases: numerics with values worked out by
hand, Stage 1 on inputs whose pooled scores and probabilities are known, Stage 2 against exact attention in numpy,
a PV skip whose decision is computed by hand, per-head numerics; and, when SPARGE_BIN names the C++ CLI, its
masks against `sparge run --masks` bit for bit on random captures (both geometries, all numerics, GQA, tails,
bfloat16 / float32, causal, windows)."""

import math
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
h5py = pytest.importorskip("h5py")

from sparge_capture import reference  # noqa: E402
from sparge_capture.reference import numerics as nm  # noqa: E402
from sparge_capture.reference.__main__ import run as reference_cli  # noqa: E402


# ----- numerics -----
def test_e4m3_rounding_by_hand():
    x = torch.tensor([448.0, 460.0, 1000.0, math.inf, -math.inf, 0.3, 0.296875, 3e-3, -0.3, 0.0])
    got = nm.round_e4m3(x).tolist()
    # 0.3 lies between 0.28125 and 0.3125 (step 2^-2/8): nearer 0.3125; 0.296875 is the tie, to the even 0.3125;
    # 3e-3 is subnormal (step 2^-9): 1.536 steps -> 2 steps = 2^-8.
    assert got == [448.0, 448.0, 448.0, 448.0, -448.0, 0.3125, 0.3125, 2.0 ** -8, -0.3125, 0.0]
    assert math.isnan(float(nm.round_e4m3(torch.tensor([math.nan]))[0]))


def test_int8_quantizer_by_hand():
    x = torch.tensor([[1.0, -0.5], [0.25, 0.0]])  # one block of two rows (fp16-exact values)
    codes, scales = nm.quantize_rows_int8(x, 2, None, "float16")
    scale = np.float32(1.0) / np.float32(127.0) + np.float32(1e-7)
    assert float(scales[0]) == float(scale)
    # t = x / scale, then ± 0.5 and truncation: 126.99.. -> 127, -63.499.. -> -63, 31.749.. -> 32, 0 -> 0
    assert codes.tolist() == [[127.0, -63.0], [32.0, 0.0]]
    codes, _ = nm.quantize_rows_int8(torch.tensor([[2.0, 0.0]]), 2, None, "float16")  # padded to 2 rows
    assert codes.tolist() == [[127.0, 0.0], [0.0, 0.0]]


def test_exp2_polynomial():
    x = torch.linspace(-20, 8.807, 4001)
    rel = ((nm.exp2_fast(x).double() - torch.exp2(x.double())) / torch.exp2(x.double())).abs().max()
    assert rel < 5e-7
    assert nm.exp2_fast(torch.tensor([3.0, -200.0, -math.inf])).tolist() == [8.0, 0.0, 0.0]


# ----- Stage 1 on inputs with known pooled scores -----
def staircase(nq=128, a=(0.0, 1.0, 2.0, 3.0), s=4.0):
    """Q rows all [s, 0]; key block j (64 rows) all [a_j, 1]: pooled scores s·a_j/√2, every block self-similar."""
    q = torch.zeros(1, 1, nq, 2)
    q[..., 0] = s
    k = torch.cat([torch.tensor([[aj, 1.0]]).expand(64, 2) for aj in a])[None, None]
    return q.half(), k.half(), k.half().clone()


def keep(**kw):
    q, k, v = staircase(kw.pop("nq", 128))
    return reference.attention(q, k, v, geometry="128x64", smooth_k=kw.pop("smooth_k", False), **kw).block_mask[0, 0]


def test_cdf_selection_by_hand():
    # probabilities ∝ exp(4·a/√2) = (0.0002, 0.0029, 0.0500, 0.9469): the running sums 0.947, 0.997, 0.9998, 1
    assert keep(simthreshd1=0.5, cdfthreshd=0.95).tolist() == [[False, False, False, True]]
    assert keep(simthreshd1=0.5, cdfthreshd=0.998).tolist() == [[False, False, True, True]]
    assert keep(simthreshd1=0.5, cdfthreshd=0.1).tolist() == [[False, False, False, True]]  # at least one
    assert keep(simthreshd1=0.5, cdfthreshd=0.95, smooth_k=True).tolist() == [[False, False, False, True]]


def test_topk_sink_theta_and_dense_by_hand():
    assert keep(simthreshd1=0.5, topk=0.5).tolist() == [[False, False, True, True]]  # trunc(0.5 · 4) = 2
    assert keep(simthreshd1=0.5, topk=0.5, sink=True).tolist() == [[True, False, True, True]]
    assert keep(simthreshd1=1.5, cdfthreshd=0.95).tolist() == [[True] * 4]  # no block similar: all forced
    assert keep(simthreshd1=0.5, cdfthreshd=0.95, is_sparse=False).tolist() == [[True] * 4]
    # a partial query tile has no self-similarity (NaN rule): its row is forced on
    assert keep(nq=200, simthreshd1=0.5, cdfthreshd=0.95).tolist() == [[False, False, False, True], [True] * 4]


def test_causal_and_window_validity():
    v = reference.stage1.block_validity(256, 256, 128, 64, True, None, "cpu")
    assert v.valid.int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert v.area[0].tolist() == [2080 + 64 * 64, 2080, 0, 0]  # 2080 = 1 + 2 + ... + 64 pairs
    w = reference.stage1.block_validity(256, 256, 64, 128, False, (10, 0), "cpu")  # keys t-10 .. t
    assert w.valid.int().tolist() == [[1, 0], [1, 0], [1, 1], [0, 1]]


# ----- Stage 2 against exact attention -----
def exact(q, k, v, causal=False, window=None, drop=()):
    q, k, v = (t.double().numpy() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, 1), np.repeat(v, group, 1)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
    ok = np.ones(s.shape[-2:], bool)
    if causal:
        ok &= j <= i
    if window:
        ok &= (j >= i - window[0]) & (j <= i + window[1])
    for lo, hi in drop:
        ok[:, lo:hi] = False
    s = np.where(ok, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


@pytest.mark.parametrize("geometry", ["128x64", "64x128"])
@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (False, (100, 30))])
def test_dense_stage2_is_exact_attention(geometry, causal, window):
    g = torch.Generator().manual_seed(7)
    q, k, v = torch.randn(1, 4, 300, 32, generator=g), torch.randn(1, 2, 300, 32, generator=g), \
        torch.randn(1, 2, 300, 32, generator=g)
    r = reference.attention(q, k, v, is_sparse=False, numerics="none", geometry=geometry, causal=causal,
                            window=window)
    assert np.abs(r.output.double().numpy() - exact(q, k, v, causal, window)).max() < 1e-5
    assert not bool(r.pv_skipped.any())


def test_pv_skip_decided_by_hand():
    """One query tile, four key blocks: block 1's scores lie 30 below block 0's (base 2), so λ = 20 skips it
    (-30 + 20 <= 0) and λ = 40 does not; the tail blocks 2 and 3 are never skipped."""
    d = 8
    q = torch.zeros(1, 1, 128, d)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, 256, d)
    c = 30.0 / (math.log2(math.e) / math.sqrt(d))  # score gap of 30 in base-2 units
    k[..., :64, 0], k[..., 64:128, 0], k[..., 128:, 0] = c / 2, -c / 2, c / 2
    v = torch.randn(1, 1, 256, d, generator=torch.Generator().manual_seed(1))
    for lam, skipped in ((20.0, True), (40.0, False)):
        r = reference.attention(q, k, v, simthreshd1=-1.0, cdfthreshd=1.0, pvthreshd=lam, numerics="none",
                                smooth_k=False)
        assert r.block_mask.all()
        assert r.pv_skipped[0, 0, 0].tolist() == [False, skipped, False, False]
        want = exact(q, k, v, drop=[(64, 128)] if skipped else [])
        assert np.abs(r.output.double().numpy() - want).max() < 1e-5


def test_per_head_numerics_route_each_head():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 256, 64, generator=g).half() for _ in range(3))
    kw = dict(simthreshd1=-0.1, cdfthreshd=0.9, pvthreshd=5.0)
    mixed = reference.attention(q, k, v, numerics=["none", "int8-fp8"], **kw).output
    exact_run = reference.attention(q, k, v, numerics="none", **kw).output
    quant_run = reference.attention(q, k, v, numerics="int8-fp8", **kw).output
    assert torch.equal(mixed[:, 0], exact_run[:, 0]) and torch.equal(mixed[:, 1], quant_run[:, 1])
    assert not torch.equal(exact_run[:, 1], quant_run[:, 1])


def test_bad_arguments_are_named():
    q = torch.zeros(1, 2, 128, 16)
    with pytest.raises(ValueError, match="pvthreshd must be >= 0"):
        reference.attention(q, q, q, pvthreshd=-1.0)
    with pytest.raises(ValueError, match="3 values for 2 query heads"):
        reference.attention(q, q, q, simthreshd1=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="geometry"):
        reference.attention(q, q, q, geometry="32x32")
    with pytest.raises(ValueError, match="not both"):
        reference.attention(q, q, q, cdfthreshd=0.9, topk=0.5)
    with pytest.raises(ValueError, match="numerics"):
        reference.attention(q, q, q, numerics="fp4")


# ----- bit-for-bit against the C++ CPU engine -----
def write_capture(path):
    g = torch.Generator().manual_seed(11)
    specs = {"l00_s000": (4, 2, 300, 300, 64, "float16", 1, None),   # GQA, partial tiles, causal
             "l01_s000": (2, 2, 200, 333, 64, "bfloat16", 0, None),  # Nq != Nkv, bfloat16
             "l02_s000": (2, 1, 320, 320, 32, "float32", 1, (100, 0))}  # float32, causal window
    with h5py.File(path, "w") as f:
        f.attrs["sparge_capture_version"] = 1
        for name, (hq, hkv, nq, nkv, d, dt, causal, window) in specs.items():
            e = f.create_group(f"entries/{name}")
            # structured data: keys cluster per block, so that attention is peaked and Stage 1 has choices
            base = torch.randn(1, hkv, -(-nkv // 64), d, generator=g).repeat_interleave(64, 2)[:, :, :nkv]
            k = 2.0 * base + 0.5 * torch.randn(1, hkv, nkv, d, generator=g)
            q = 2.0 * torch.randn(1, hq, nq, d, generator=g)
            v = torch.randn(1, hkv, nkv, d, generator=g)
            for label, t in (("q", q), ("k", k), ("v", v)):
                if dt == "bfloat16":
                    e.create_dataset(label, data=t.bfloat16().view(torch.int16).numpy().view(np.uint16))
                    e[label].attrs["dtype"] = "bfloat16"
                else:
                    e.create_dataset(label, data=t.numpy().astype(dt))
            e.attrs["causal"] = causal
            if window:
                e.attrs["window"] = np.array(window, dtype=np.int64)


@pytest.mark.parametrize("options", [
    ["--target", "sm89", "--theta", "0.1", "--tau", "0.9", "--lambda", "3", "--sink"],
    ["--target", "sm90", "--theta", "-0.1", "--topk", "0.4", "--lambda", "2"],
    ["--target", "sm80", "--theta", "0.2", "--tau", "0.95", "--lambda", "1", "--diagonal"],
    ["--quant", "none", "--block", "64x128", "--theta", "0.0", "--tau", "0.8", "--lambda", "0.5"],
    ["--quant", "none", "--block", "128x64", "--no-smooth-k", "--theta", "0.3", "--tau", "0.9", "--lambda", "4"],
])
def test_masks_equal_cpu_engine(tmp_path, options):
    sparge = os.environ.get("SPARGE_BIN")
    if not sparge:
        pytest.skip("SPARGE_BIN is not set (ctest sets it)")
    cap = tmp_path / "c.h5"
    write_capture(cap)
    subprocess.run([sparge, "run", str(cap), "--engine", "cpu", *options, "--masks", str(tmp_path / "cpp.h5"),
                    "--report", str(tmp_path / "cpp.json")], check=True, capture_output=True)
    assert reference_cli([str(cap), *options, "--masks", str(tmp_path / "ref.h5"),
                          "--report", str(tmp_path / "ref.json")]) == 0
    check_same_l1(tmp_path / "cpp.json", tmp_path / "ref.json")
    on = []
    with h5py.File(tmp_path / "cpp.h5") as a, h5py.File(tmp_path / "ref.h5") as b:
        assert sorted(a["entries"]) == sorted(b["entries"])
        for name in a["entries"]:
            ga, gb = a["entries"][name], b["entries"][name]
            for ds in ("block_mask", "pv_skipped"):
                assert np.array_equal(ga[ds][...], gb[ds][...]), (name, ds)
            on.append(ga["block_mask"][...].ravel())
            for key in ("block_q", "block_k", "geometry", "numerics", "target", "smooth_k", "sink", "causal"):
                assert ga.attrs[key] == gb.attrs[key], (name, key)
            for key in ("sparsity_stage1", "pv_skip_rate", "sparsity_total", "sparsity_total_area"):
                assert ga.attrs[key] == pytest.approx(gb.attrs[key], abs=1e-12), (name, key)
    on = np.concatenate(on)
    assert 0.05 < on.mean() < 0.95  # the runs select some blocks and leave others out


def check_same_l1(cpp_report, ref_report):
    """Per-head L1 of `sparge run --report` and of the reference CLI's report within 1e-3 relative."""
    import json
    cpp, ref = json.load(open(cpp_report)), json.load(open(ref_report))
    for ec in cpp["entries"]:
        er = next(e for e in ref["entries"] if e["name"] == ec["name"])
        for hc, hr in zip(ec["heads"], er["heads"]):
            assert hc["head"] == hr["head"]
            assert hr["l1"] == pytest.approx(hc["l1"], rel=1e-3, abs=1e-6), (ec["name"], hc["head"])
