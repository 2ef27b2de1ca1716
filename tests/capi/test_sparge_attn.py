"""The Python package sparge_attn on the CPU engine (and on CUDA where a device is usable): its outputs against
the sparge CLI's on the same capture and parameters (block masks exactly, per-head L1 and counts), layouts,
per-head numerics, torch.compile, the drop-in functions' signatures, and clear errors for bad arguments.
Needs SPARGE_ATTN_LIBRARY (the built libsparge_attn.so) and SPARGE_BIN (the sparge CLI)."""
import ctypes
import inspect
import json
import os
import subprocess

import h5py
import numpy as np
import pytest
import torch

import sparge_attn
from sparge_attn import SpargeAttnError, _capi
from sparge_attn.compat import spas_sage2_attn_meansim_cuda, spas_sage2_attn_meansim_topk_cuda

SPARGE = os.environ.get("SPARGE_BIN")
CUDA = torch.cuda.is_available() and sparge_attn.cuda_device_count() > 0


def write_capture(path, entries):
    """entries: name -> (q, k, v numpy fp16 HND, causal, window or None)."""
    with h5py.File(path, "w") as f:
        f.attrs["sparge_capture_version"] = 1
        for name, (q, k, v, causal, window) in entries.items():
            g = f.create_group(f"entries/{name}")
            g.attrs["causal"] = int(causal)
            if window is not None:
                g.attrs["window"] = np.array(window, dtype=np.int64)
            g["q"], g["k"], g["v"] = q, k, v


def random_qkv(rng, heads, kv_heads, nq, nkv, d):
    """Keys and queries sharing one direction per 64-token segment, so that blocks differ in similarity and
    scores in size (selections that are not all or nothing, PV skips, rows with no key), fp16."""
    dirs = rng.standard_normal((1, kv_heads, (max(nq, nkv) + 63) // 64, d))
    k = rng.standard_normal((1, kv_heads, nkv, d)) + np.repeat(dirs, 64, axis=2)[:, :, :nkv]
    q_dirs = np.repeat(np.repeat(dirs, heads // kv_heads, axis=1), 64, axis=2)[:, :, :nq]
    q = 0.5 * rng.standard_normal((1, heads, nq, d)) + 1.5 * q_dirs
    v = rng.standard_normal((1, kv_heads, nkv, d))
    return (x.astype(np.float16) for x in (q, k, v))


def dense_reference(q, k, v, causal, window, scale):
    """Exact attention in float64, [B, Hq, Nq, D]."""
    q, k, v = (torch.from_numpy(np.asarray(x, np.float64)) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) * scale
    i = torch.arange(q.shape[2])[:, None]
    j = torch.arange(k.shape[2])[None, :]
    left, right = window if window is not None else (-1, -1)
    if causal:
        right = 0
    hidden = torch.zeros_like(s, dtype=torch.bool)
    if right >= 0:
        hidden |= j > i + right
    if left >= 0:
        hidden |= j < i - left
    s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, -1).nan_to_num() @ v


CASES = [
    # (name, heads, kv_heads, nq, nkv, causal, window, CLI options, attention() keywords)
    ("gqa_causal_fp8", 4, 2, 700, 700, True, None,
     ["--quant", "int8-fp8", "--block", "128x64", "--theta=-0.1", "--tau", "0.9", "--lambda", "3"],
     dict(simthreshd1=-0.1, cdfthreshd=0.9, pvthreshd=3, numerics="int8-fp8", geometry="128x64", is_causal=True)),
    ("cross_topk_fp16", 2, 2, 300, 900, False, None,
     ["--quant", "int8-fp16", "--block", "64x128", "--theta", "0.2", "--topk", "0.4", "--lambda", "2", "--sink"],
     dict(simthreshd1=0.2, topk=0.4, pvthreshd=2, numerics="int8-fp16", geometry="64x128", attention_sink=True)),
    ("window_exact", 2, 1, 600, 600, False, (150, 40),
     ["--quant", "none", "--block", "128x64", "--theta", "0.1", "--tau", "0.8", "--lambda", "4", "--no-smooth-k"],
     dict(simthreshd1=0.1, cdfthreshd=0.8, pvthreshd=4, numerics="none", geometry="128x64", smooth_k=False,
          window=(150, 40))),
]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Per case: the capture's tensors, the CLI's masks and report."""
    if not SPARGE:
        pytest.skip("SPARGE_BIN is not set")
    tmp = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(7)
    runs = {}
    for name, h, hkv, nq, nkv, causal, window, cli, _ in CASES:
        q, k, v = random_qkv(rng, h, hkv, nq, nkv, 64)
        cap = tmp / f"{name}.h5"
        write_capture(cap, {"e": (q, k, v, causal, window)})
        masks, report = tmp / f"{name}.masks.h5", tmp / f"{name}.json"
        subprocess.run([SPARGE, "run", str(cap), "--engine", "cpu", "--masks", str(masks), "--report", str(report),
                        "--summary-only"] + cli, check=True, capture_output=True)
        with h5py.File(masks) as f:
            mask = f["entries/e/block_mask"][...]
        runs[name] = (q, k, v, mask, json.load(open(report))["entries"][0])
    return runs


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_cli(cli_runs, case):
    name, h, hkv, nq, nkv, causal, window, _, kwargs = case
    q, k, v, cli_mask, report = cli_runs[name]
    o, stats = sparge_attn.attention(*(torch.from_numpy(x) for x in (q, k, v)), return_mask=True, **kwargs)
    assert o.dtype == torch.float16 and o.shape == (1, h, nq, 64)
    np.testing.assert_array_equal(stats.mask.numpy(), cli_mask)
    ref = dense_reference(q, k, v, causal, window, 1 / 8)
    for head in report["heads"]:
        hh = head["head"]
        diff = (o[0, hh].double() - ref[0, hh]).abs().sum() / ref[0, hh].abs().sum()
        assert abs(diff.item() - head["l1"]) <= 1e-3 + 0.01 * head["l1"], (hh, diff.item(), head["l1"])
        valid, selected, computed, skipped, _ = stats.counts[0, hh].tolist()
        assert (valid, selected, computed, skipped) == (head["valid_blocks"], head["selected_blocks"],
                                                         head["computed_pv_blocks"], head["skipped_pv_blocks"])


def small(seed=0, heads=4, kv_heads=2, n=257, d=64, dtype=torch.float16, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, heads, n, d, generator=g).to(dtype)
    k = torch.randn(1, kv_heads, n, d, generator=g).to(dtype)
    v = torch.randn(1, kv_heads, n, d, generator=g).to(dtype)
    return q.to(device), k.to(device), v.to(device)


def test_layouts_and_strides_agree():
    q, k, v = small()
    kw = dict(simthreshd1=-0.1, topk=0.5, pvthreshd=5, is_causal=True)
    o = sparge_attn.attention(q, k, v, **kw)
    nhd = sparge_attn.attention(*(t.transpose(1, 2).contiguous() for t in (q, k, v)), tensor_layout="NHD", **kw)
    assert nhd.shape == (1, 257, 4, 64)
    assert torch.equal(nhd.transpose(1, 2), o)
    wide = torch.zeros(1, 4, 257, 128, dtype=q.dtype)
    wide[..., 32:96] = q
    assert torch.equal(sparge_attn.attention(wide[..., 32:96], k, v, **kw), o)  # a strided view
    assert torch.equal(sparge_attn.attention(q.float(), k.float(), v.float(), **kw), o)  # float32 runs as fp16


def test_per_head_numerics_match_separate_calls():
    q, k, v = small(1)
    kw = dict(simthreshd1=[-0.1, 0.3, 0.5, -1.0], cdfthreshd=torch.tensor([0.9, 0.8, 0.95, 0.7]), pvthreshd=3)
    mixed = sparge_attn.attention(q, k, v, numerics=["none", "int8-fp8", "none", "int8-fp8"], **kw)
    exact = sparge_attn.attention(q, k, v, numerics="none", **kw)
    quant = sparge_attn.attention(q, k, v, numerics="int8-fp8", **kw)
    for h, src in enumerate([exact, quant, exact, quant]):
        assert torch.equal(mixed[:, h], src[:, h]), h


def test_dense_heads_are_exact_attention():
    q, k, v = small(2, heads=2, kv_heads=2, n=300)
    o = sparge_attn.attention(q, k, v, simthreshd1=0.5, cdfthreshd=0.5, numerics="none", is_sparse=[False, False],
                              is_causal=True)
    ref = dense_reference(q.numpy(), k.numpy(), v.numpy(), True, None, 1 / 8)
    assert ((o.double() - ref).abs().max() < 2e-3).item()


def test_repeated_calls_follow_parameter_changes():
    """Calls with the same shapes reuse their checked arguments; a per-head tensor changed in place, or another
    value, must still take effect (the oracle: each selection's block counts, Stage 1 of a fresh call)."""
    q, k, v = small(5)
    topk = torch.full((4,), 0.25)
    kw = dict(simthreshd1=-1.0, pvthreshd=1e30, return_sparsity=True)
    _, few = sparge_attn.attention(q, k, v, topk=topk, **kw)
    _, again = sparge_attn.attention(q, k, v, topk=topk, **kw)
    topk.fill_(1.0)
    _, all_blocks = sparge_attn.attention(q, k, v, topk=topk, **kw)
    _, listed = sparge_attn.attention(q, k, v, topk=[0.25] * 4, **kw)
    assert torch.equal(few.counts, again.counts) and torch.equal(few.counts, listed.counts)
    assert all_blocks.stage1 == 0.0 and few.stage1 > 0.2
    with pytest.raises(ValueError, match="NaN for head 2"):
        sparge_attn.attention(q, k, v, topk=[0.25, 0.25, float("nan"), 0.25], **kw)


def test_torch_compile_traces_the_op():
    q, k, v = small(3)

    def f(q, k, v):
        return sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=0.3, is_causal=True) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(q, k, v), f(q, k, v))


def test_compat_signatures_and_results():
    want = {
        spas_sage2_attn_meansim_cuda: dict(attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, smooth_k=True,
                                           simthreshd1=0.6, cdfthreshd=0.98, pvthreshd=50, attention_sink=False,
                                           tensor_layout="HND", output_dtype=torch.float16, return_sparsity=False),
        spas_sage2_attn_meansim_topk_cuda: dict(attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                                smooth_k=True, simthreshd1=-0.1, cdfthreshd=None, topk=0.5,
                                                pvthreshd=50, attention_sink=False, tensor_layout="HND",
                                                output_dtype=torch.float16, return_sparsity=False),
    }
    for fn, defaults in want.items():
        params = inspect.signature(fn).parameters
        assert list(params) == ["q", "k", "v"] + list(defaults), fn.__name__
        assert {n: p.default for n, p in params.items() if n not in "qkv"} == defaults, fn.__name__
    q, k, v = small(4)
    o, sparsity = spas_sage2_attn_meansim_topk_cuda(q, k, v, topk=0.5, is_causal=True, return_sparsity=True)
    direct, stats = sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=0.5, is_causal=True, return_sparsity=True)
    assert torch.equal(o, direct) and isinstance(sparsity, float) and sparsity == stats.stage1
    assert torch.equal(spas_sage2_attn_meansim_cuda(q, k, v),
                       sparge_attn.attention(q, k, v, simthreshd1=0.6, cdfthreshd=0.98))
    with pytest.raises(ValueError, match="not both"):
        spas_sage2_attn_meansim_topk_cuda(q, k, v, cdfthreshd=0.9)


def test_struct_sizes_match_the_c_header():
    # The same numbers are checked against sizeof() in test_capi.c.
    assert ctypes.sizeof(_capi.Problem) == 200
    assert ctypes.sizeof(_capi.HeadParams) == 64
    assert ctypes.sizeof(_capi.Outputs) == 48


@pytest.mark.parametrize("call, error, fragment", [
    (lambda q, k, v: sparge_attn.attention(q[0], k, v, simthreshd1=0, topk=0.5), ValueError, "4-D"),
    (lambda q, k, v: sparge_attn.attention(q, k.double(), v, simthreshd1=0, topk=0.5), TypeError, "share one dtype"),
    (lambda q, k, v: sparge_attn.attention(q[:, :3], k, v, simthreshd1=0, topk=0.5), ValueError, "multiple"),
    (lambda q, k, v: sparge_attn.attention(q, k[:, :, :100], v, simthreshd1=0, topk=0.5), ValueError, "shapes"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=0.5, cdfthreshd=0.9), ValueError,
     "exactly one"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=[0, 0, float("nan"), 0], topk=0.5), ValueError,
     "NaN for head 2"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=[0, 0], topk=0.5), ValueError, "one per query head"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=0.5, numerics="fp4"), ValueError, "fp4"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=0.5, geometry="32x32"), ValueError, "32x32"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=0.5, window=(-3, 0)), ValueError, "window"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=0.5, scale=-1.0), ValueError, "scale"),
    (lambda q, k, v: sparge_attn.attention(q[..., :48], k[..., :48], v[..., :48], simthreshd1=0, topk=0.5),
     ValueError, "head dim 48"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=1.5), SpargeAttnError, "top-k"),
    (lambda q, k, v: sparge_attn.attention(q, k, v, simthreshd1=0, topk=0.5, pvthreshd=-1), SpargeAttnError,
     "pvthreshd"),
    (lambda q, k, v: sparge_attn.attention(q, k, v.to("meta"), simthreshd1=0, topk=0.5), ValueError, "one device"),
])
def test_bad_arguments(call, error, fragment):
    with pytest.raises(error, match=fragment):
        call(*small())


def test_missing_library_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARGE_ATTN_LIBRARY", str(tmp_path / "nope.so"))
    with pytest.raises(SpargeAttnError, match="libsparge_attn not found.*SPARGE_ATTN_LIBRARY=.*nope.so"):
        _capi._load(*_capi._candidates())


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
@pytest.mark.parametrize("numerics", ["none", "int8-fp8"])
def test_cuda_matches_cpu(numerics):
    q, k, v = small(5, n=700)
    kw = dict(simthreshd1=-0.1, cdfthreshd=0.9, pvthreshd=3, is_causal=True, numerics=numerics, geometry="64x128",
              return_mask=True)
    o_cpu, s_cpu = sparge_attn.attention(q, k, v, **kw)
    o_gpu, s_gpu = sparge_attn.attention(*(t.cuda() for t in (q, k, v)), **kw)
    assert torch.equal(s_gpu.mask.cpu(), s_cpu.mask)
    ref = dense_reference(q.numpy(), k.numpy(), v.numpy(), True, None, 1 / 8)
    for h in range(4):
        l1 = [((o[0, h].double().cpu() - ref[0, h]).abs().sum() / ref[0, h].abs().sum()).item() for o in (o_cpu, o_gpu)]
        assert abs(l1[0] - l1[1]) <= 2e-3 + 0.03 * l1[0], (h, l1)


def sink_heavy(seed, gap, n=1000, d=64):
    """Every query's score with key 0 lies `gap` base-2 units (at scale 1/8) above 0 and its other scores within a
    few units of 0, so that the PV-skip vote skips most blocks of each row at λ well below the gap."""
    g = torch.Generator().manual_seed(seed)
    u = torch.ones(d) / d ** 0.5
    q = 20.0 * u + torch.randn(1, 4, n, d, generator=g)
    k = torch.randn(1, 2, n, d, generator=g)
    k -= (k @ u)[..., None] * u  # the other scores: q's noise against k, ~1.4 base-2 units apart
    k[:, :, 0] = gap / (20.0 / 8 * 1.4426950408889634) * u
    v = torch.randn(1, 2, n, d, generator=g)
    return (t.to(torch.float16).cuda() for t in (q, k, v))


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
@pytest.mark.parametrize("numerics", ["int8-fp8", "none"])
def test_cuda_vote_left_out_only_where_it_cannot_matter(numerics):
    """At λ >= 40 a PV skip drops only blocks whose P round to zero, so without counters the op runs no vote (and
    at top-k 1 the dense walk): where the vote skips most blocks (key 0 69-102 base-2 units above the rest), the
    output equals the counted call's to an fp16 unit in the last place. At λ 8 with gaps of 12-23 the skips change
    the output, and the vote runs with or without counters."""
    def call(q, k, v, lam, topk, counted, **extra):
        r = sparge_attn.attention(q, k, v, simthreshd1=-0.1, topk=topk, pvthreshd=lam, numerics=numerics,
                                  return_sparsity=counted, **extra)
        return r if counted else (r, None)

    def ulps(a, b):
        return ((a.float() - b.float()).abs() / (2.0 ** -10 * b.float().abs().clamp(min=2.0 ** -14))).max().item()

    q, k, v = sink_heavy(3, gap=90)
    for topk in (0.5, 1.0):
        counted, stats = call(q, k, v, 50, topk, True)
        assert stats.pv_skip_rate > 0.5, stats.pv_skip_rate  # the vote skips: the data tests what it should
        fast, _ = call(q, k, v, 50, topk, False)
        assert ulps(fast, counted) <= 1.0, (topk, ulps(fast, counted))
    dense, _ = call(q, k, v, 50, 1.0, False, is_sparse=False)
    assert torch.equal(call(q, k, v, 50, 1.0, False)[0], dense)  # top-k 1 walks dense

    # No skips at λ 50: the walk without the vote is the same walk, but for int8-fp8's denominator on Hopper,
    # which there sums the e4m3 P that P·V multiplies (on the tensor cores) where the counted walk sums the
    # unrounded P, as SpargeAttn does. Each P moves by at most 2^-4 in its rounding, in either direction, so
    # over a row's hundreds of keys the two sums, and the rows, part by a small fraction of that on average.
    q, k, v = (t.cuda() for t in small(9, n=1000))
    for causal in (False, True):
        counted, _ = call(q, k, v, 50, 0.3, True, is_causal=causal)
        fast = call(q, k, v, 50, 0.3, False, is_causal=causal)[0]
        if numerics == "none":
            assert ulps(fast, counted) <= 1.0
        else:
            rel = ((fast.float() - counted.float()).norm(dim=-1) / counted.float().norm(dim=-1)).mean().item()
            assert rel <= 2.0 ** -6, (causal, rel)

    q, k, v = sink_heavy(4, gap=20)
    counted, stats = call(q, k, v, 8, 1.0, True)
    assert stats.pv_skip_rate > 0.5, stats.pv_skip_rate
    dense, _ = call(q, k, v, 8, 1.0, False, is_sparse=False)
    assert ulps(counted, dense) > 4  # these skips matter,
    assert torch.equal(call(q, k, v, 8, 1.0, False)[0], counted)  # so the vote still runs uncounted


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_cuda_graphs_own_their_workspace():
    """Graphs captured on streams the op has not seen, and torch.compile's CUDA-graph trees (which reject a
    live tensor of the graph's pool that the capture does not account for), replay the eager result; two graphs
    of one problem replay independently of each other and of eager calls between them."""
    q, k, v = (t.cuda() for t in small(7, n=1000))
    kw = dict(simthreshd1=-0.1, topk=0.3, is_causal=True)
    eager = sparge_attn.attention(q, k, v, **kw)
    graphs, outs = [], []
    for _ in range(2):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs.append(sparge_attn.attention(q, k, v, **kw))
        graphs.append(g)
    for g, o in zip(graphs, outs):
        o.zero_()
        sparge_attn.attention(q, k, v, **kw)  # an eager call between the replays
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(o, eager)
    f = torch.compile(lambda q, k, v: sparge_attn.attention(q, k, v, **kw) * 1.0, mode="reduce-overhead",
                      fullgraph=True)
    for _ in range(3):
        got = f(q, k, v)
    assert torch.equal(got, eager)
