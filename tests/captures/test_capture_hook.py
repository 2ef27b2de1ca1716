"""Tests of the capture hook (captures/sparge_capture): what it records is what the attention kernel computed with.

Runs where torch and transformers are installed (skips otherwise). The expected attention comes from
the model itself (a forward hook on o_proj's input) or from torch's SDPA, and is compared with
attention recomputed in float64 from the captured Q/K/V, so a wrong layout, head order, GQA mapping,
rotary placement, causal flag or scale fails.

With SPARGE_BIN set to the sparge CLI, the files are also opened with the C++ reader (`sparge info`).
SPARGE_TEST_DEVICE=cuda runs the models and SDPA calls on the GPU (tools/gpu/capture_hook_check.sh does both).
"""

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

# The installed package when there is one (CI installs it), else the source tree.
sys.path.append(str(Path(__file__).resolve().parents[2] / "captures"))
from sparge_capture import SpargeCapture  # noqa: E402

F = torch.nn.functional
ORIGINAL_SDPA = F.scaled_dot_product_attention
HQ, HKV, HEAD_DIM, LAYERS, TOKENS = 4, 2, 16, 3, 70
DEVICE = os.environ.get("SPARGE_TEST_DEVICE", "cpu")
if DEVICE != "cpu" and not (DEVICE.startswith("cuda") and torch.cuda.is_available()):
    pytest.skip(f"SPARGE_TEST_DEVICE={DEVICE} is not available", allow_module_level=True)


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    cfg = LlamaConfig(vocab_size=97, hidden_size=HQ * HEAD_DIM, intermediate_size=96,
                      num_hidden_layers=LAYERS, num_attention_heads=HQ, num_key_value_heads=HKV,
                      head_dim=HEAD_DIM, max_position_embeddings=256)
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).eval().to(DEVICE)
    assert model.config._attn_implementation == "sdpa"
    return model


def attention_outputs(model):
    """Forward hooks that keep each layer's attention output (the input of o_proj), [B, N, Hq*D]."""
    outs, handles = {}, []
    for i, layer in enumerate(model.model.layers):
        def hook(_mod, inputs, i=i):
            outs[i] = inputs[0].detach().clone()
        handles.append(layer.self_attn.o_proj.register_forward_pre_hook(hook))
    return outs, handles


def read_tensor(ds):
    """A captured dataset as float64, decoding bfloat16 stored as uint16."""
    raw = ds[()]
    if ds.attrs.get("dtype") == "bfloat16":
        assert raw.dtype == np.uint16
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.astype(np.float64)


def visible(nq, nk, causal, window=None):
    """[nq, nk] keep-mask written out from the format's definition: top-left aligned, causal keeps
    key <= query, window [left, right] keeps query - left <= key <= query + right (-1 = unbounded)."""
    qi, ki = np.arange(nq)[:, None], np.arange(nk)[None, :]
    keep = np.ones((nq, nk), dtype=bool)
    if causal:
        keep &= ki <= qi
    if window is not None:
        left, right = (int(x) for x in window)
        if right >= 0:
            keep &= ki <= qi + right
        if left >= 0:
            keep &= ki >= qi - left
    return keep


def reference_attention(q, k, v, causal, scale, window=None):
    """Straightforward attention in float64: [B,Hq,Nq,D] x [B,Hkv,Nkv,D] -> [B,Hq,Nq,Dv]."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)  # query head h uses KV head h // group
    v = np.repeat(v, group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    s = np.where(visible(s.shape[-2], s.shape[-1], causal, window), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


def sparge_info(path):
    """Runs `sparge info` when SPARGE_BIN is set; returns its stdout or None."""
    binary = os.environ.get("SPARGE_BIN")
    if not binary:
        return None
    res = subprocess.run([binary, "info", str(path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"sparge info failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_llama_gqa_capture_matches_model_attention(tmp_path):
    model = tiny_llama()
    ids = torch.randint(0, 97, (2, TOKENS), generator=torch.Generator().manual_seed(7)).to(DEVICE)
    with torch.no_grad():
        plain_logits = model(ids).logits
    outs, handles = attention_outputs(model)
    path = tmp_path / "llama.h5"
    try:
        # dtype "auto" (the default): the float32 model is stored as float32.
        with torch.no_grad(), SpargeCapture(str(path), attrs={"model": "tiny llama"}) as cap:
            logits = model(ids).logits
    finally:
        for h in handles:
            h.remove()
    assert torch.equal(logits, plain_logits), "capturing changed the model's output"
    assert cap.errors == 0
    # One entry per layer: the inner SDPA call of transformers' sdpa function is not recorded again.
    assert cap.entries == [f"l{i:02d}_s000" for i in range(LAYERS)]

    with h5py.File(path, "r") as f:
        assert int(f.attrs["sparge_capture_version"]) == 1
        assert f.attrs["model"] == "tiny llama"
        assert sorted(f["entries"].keys()) == cap.entries
        for i in range(LAYERS):
            g = f[f"entries/l{i:02d}_s000"]
            assert g["q"].shape == (2, HQ, TOKENS, HEAD_DIM)
            assert g["k"].shape == (2, HKV, TOKENS, HEAD_DIM)  # KV heads, before repeat_kv
            assert g["v"].shape == (2, HKV, TOKENS, HEAD_DIM)
            assert g["q"].dtype == np.float32
            assert g["q"].chunks == (1, 1, TOKENS, HEAD_DIM)
            assert g["q"].compression == "gzip" and g["q"].shuffle
            assert int(g.attrs["layer"]) == i and int(g.attrs["step"]) == 0
            assert int(g.attrs["causal"]) == 1 and "window" not in g.attrs
            assert g.attrs["module"] == f"model.layers.{i}.self_attn"
            assert g.attrs["kind"] == "self" and g.attrs["stack"] == "decoder"
            assert math.isclose(float(g.attrs["scale"]), HEAD_DIM ** -0.5, rel_tol=1e-12)
            q, k, v = (read_tensor(g[n]) for n in "qkv")
            got = reference_attention(q, k, v, True, float(g.attrs["scale"]))
            want = outs[i].double().cpu().numpy().reshape(2, TOKENS, HQ, HEAD_DIM).transpose(0, 2, 1, 3)
            np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)
            # The same Q/K/V without the causal mask, or with KV heads tiled instead of grouped,
            # give a different answer: the comparison above can fail.
            assert np.abs(reference_attention(q, k, v, False, float(g.attrs["scale"])) - want).max() > 1e-3
            tiled = reference_attention(q, np.tile(k, (1, 2, 1, 1)), np.tile(v, (1, 2, 1, 1)), True,
                                        float(g.attrs["scale"]))
            assert np.abs(tiled - want).max() > 1e-3

    info = sparge_info(path)
    if info is not None:
        for i in range(LAYERS):
            assert f"l{i:02d}_s000" in info


def test_capture_restores_functions_and_filters_layers(tmp_path):
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    sdpa_before = F.scaled_dot_product_attention
    hf_before = ALL_ATTENTION_FUNCTIONS["sdpa"]
    model = tiny_llama()
    ids = torch.randint(0, 97, (1, 40), generator=torch.Generator().manual_seed(3)).to(DEVICE)
    path = tmp_path / "filtered.h5"
    with torch.no_grad(), SpargeCapture(str(path), layers=[1], max_tokens=32, dtype="float16") as cap:
        assert F.scaled_dot_product_attention is not sdpa_before
        assert ALL_ATTENTION_FUNCTIONS["sdpa"] is not hf_before
        model(ids)
    assert F.scaled_dot_product_attention is sdpa_before
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is hf_before
    assert "sdpa" not in ALL_ATTENTION_FUNCTIONS._local_mapping or hf_before is ALL_ATTENTION_FUNCTIONS._local_mapping["sdpa"]
    assert cap.entries == ["l01_s000"]
    with h5py.File(path, "r") as f:
        g = f["entries/l01_s000"]
        assert g["q"].shape == (1, HQ, 32, HEAD_DIM) and g["k"].shape == (1, HKV, 32, HEAD_DIM)
        assert g["q"].dtype == np.float16
        assert int(g.attrs["orig_tokens_q"]) == 40
        assert int(f.attrs["max_tokens"]) == 32
    # A second capture after the first one works (nothing left patched or locked).
    with SpargeCapture(str(tmp_path / "again.h5")) as cap2:
        F.scaled_dot_product_attention(torch.randn(1, 1, 8, 16), torch.randn(1, 1, 8, 16), torch.randn(1, 1, 8, 16))
    assert cap2.entries == ["c000_s000"]


@pytest.mark.filterwarnings("ignore:SpargeCapture.*changes the attention output")  # tested below
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_direct_sdpa_calls_and_steps(tmp_path, dtype):
    gen = torch.Generator().manual_seed(11)
    q1, k1, v1 = (torch.randn(2, 4, n, 32, generator=gen).to(DEVICE) for n in (100, 80, 80))  # cross-attention
    q2 = torch.randn(1, 6, 90, 64, generator=gen).to(DEVICE)
    k2, v2 = (torch.randn(1, 3, 90, 64, generator=gen).to(DEVICE) for _ in range(2))  # GQA via enable_gqa
    path = tmp_path / f"direct_{dtype}.h5"
    outputs = {}
    with SpargeCapture(str(path), dtype=dtype, steps=[0, 2]) as cap:
        for step in range(3):
            outputs[("c000", step)] = F.scaled_dot_product_attention(q1, k1, v1, scale=0.3)
            outputs[("c001", step)] = F.scaled_dot_product_attention(q2, k2, v2, None, 0.0, True, enable_gqa=True)
            cap.next_step()
    assert torch.equal(outputs[("c000", 0)], F.scaled_dot_product_attention(q1, k1, v1, scale=0.3))
    assert cap.entries == ["c000_s000", "c001_s000", "c000_s002", "c001_s002"]
    tol = {"float32": 1e-5, "float16": 1e-5, "bfloat16": 1e-5}[dtype]
    with h5py.File(path, "r") as f:
        for name in cap.entries:
            g = f["entries"][name]
            call, step = name[:4], int(name[-3:])
            assert int(g.attrs["step"]) == step and int(g.attrs["call_index"]) == int(call[1:])
            assert "layer" not in g.attrs
            if dtype == "bfloat16":
                assert g["q"].dtype == np.uint16 and g["q"].attrs["dtype"] == "bfloat16"
            else:
                assert g["q"].dtype == np.dtype(dtype) and "dtype" not in g["q"].attrs
            q, k, v = (read_tensor(g[n]) for n in "qkv")
            src = (q1, k1, v1) if call == "c000" else (q2, k2, v2)
            torch_dtype = getattr(torch, dtype)
            for got, t in zip((q, k, v), src):
                # The stored values are exactly the tensors rounded to the storage dtype.
                np.testing.assert_array_equal(got, t.to(torch_dtype).double().cpu().numpy())
            if call == "c000":
                assert int(g.attrs["causal"]) == 0 and float(g.attrs["scale"]) == 0.3
                assert g["q"].shape == (2, 4, 100, 32) and g["k"].shape == (2, 4, 80, 32)
                want = F.scaled_dot_product_attention(*(t.to(torch_dtype).double().cpu() for t in src), scale=0.3)
                got_o = reference_attention(q, k, v, False, 0.3)
            else:
                assert int(g.attrs["causal"]) == 1 and "scale" not in g.attrs
                assert g["k"].shape == (1, 3, 90, 64)
                want = F.scaled_dot_product_attention(*(t.to(torch_dtype).double().cpu() for t in src),
                                                      is_causal=True, enable_gqa=True)
                got_o = reference_attention(q, k, v, True, 1 / math.sqrt(64))
            np.testing.assert_allclose(got_o, want.numpy(), rtol=0, atol=tol)
        if dtype == "float32":
            # Recomputation from the captured tensors matches what the model got back, not just itself.
            g = f["entries/c001_s000"]
            got_o = reference_attention(*(read_tensor(g[n]) for n in "qkv"), True, 1 / math.sqrt(64))
            np.testing.assert_allclose(got_o, outputs[("c001", 0)].double().cpu().numpy(), rtol=0, atol=2e-5)
    info = sparge_info(path)
    if info is not None:
        for name in cap.entries:
            assert name in info


def test_explicit_causal_mask_is_recognised(tmp_path):
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 33, 16, generator=gen) for _ in range(3))
    tril = torch.ones(33, 33, dtype=torch.bool).tril()
    additive = torch.zeros(33, 33).masked_fill(~tril, float("-inf"))
    with SpargeCapture(str(tmp_path / "masks.h5")) as cap:
        F.scaled_dot_product_attention(q, k, v, attn_mask=tril)
        F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
        F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(33, 33, dtype=torch.bool))
        with pytest.warns(RuntimeWarning):
            F.scaled_dot_product_attention(q, k, v, attn_mask=torch.rand(33, 33) > 0.5)
    with h5py.File(tmp_path / "masks.h5", "r") as f:
        kinds = [(int(f["entries"][n].attrs["causal"]), f["entries"][n].attrs["attn_mask"]) for n in cap.entries]
    assert kinds[:3] == [(1, "causal"), (1, "causal"), (0, "none")]
    assert kinds[3][0] == 0 and kinds[3][1].startswith("other: a mask (33, 33) whose rows are not contiguous")


def test_float16_overflow_falls_back_to_float32(tmp_path):
    q = torch.full((1, 1, 8, 16), 1e5)  # beyond float16's 65504
    k, v = torch.randn(1, 1, 8, 16), torch.randn(1, 1, 8, 16)
    with SpargeCapture(str(tmp_path / "big.h5"), dtype="float16") as cap:
        with pytest.warns(RuntimeWarning, match="overflow"):
            F.scaled_dot_product_attention(q, k, v)
    with h5py.File(tmp_path / "big.h5", "r") as f:
        g = f["entries"][cap.entries[0]]
        assert all(g[n].dtype == np.float32 for n in "qkv")
        np.testing.assert_array_equal(g["q"][()], q.numpy())


def test_nested_capture_is_refused(tmp_path):
    with SpargeCapture(str(tmp_path / "a.h5")):
        with pytest.raises(RuntimeError):
            with SpargeCapture(str(tmp_path / "b.h5")):
                pass
    assert F.scaled_dot_product_attention is ORIGINAL_SDPA


def entry_attrs(path, name):
    with h5py.File(path, "r") as f:
        g = f["entries"][name]
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in g.attrs.items()}


def test_band_masks_become_windows(tmp_path):
    gen = torch.Generator().manual_seed(21)
    q, k, v = (torch.randn(2, 3, 40, 16, generator=gen) for _ in range(3))
    qi, ki = torch.arange(40)[:, None], torch.arange(40)[None, :]
    sliding = (ki <= qi) & (ki > qi - 8)  # transformers' sliding window 8: causal, 7 keys back
    local = (ki - qi).abs() <= 5  # bidirectional local attention
    qc, kc, vc = torch.randn(1, 3, 10, 16), torch.randn(1, 3, 30, 16), torch.randn(1, 3, 30, 16)
    cache = torch.ones(10, 30, dtype=torch.bool).tril(diagonal=20)  # 10 new queries after 20 cached keys
    path = tmp_path / "bands.h5"
    with SpargeCapture(str(path)) as cap:
        outs = [F.scaled_dot_product_attention(q, k, v, attn_mask=sliding),
                F.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(40, 40).masked_fill(~local, -1e9)),
                F.scaled_dot_product_attention(qc, kc, vc, attn_mask=cache[None, None])]
    expected = [(1, [7, 0]), (0, [5, 5]), (0, [-1, 20])]
    for name, out, (causal, window) in zip(cap.entries, outs, expected):
        a = entry_attrs(path, name)
        assert (int(a["causal"]), a["window"], a["attn_mask"]) == (causal, window, "window"), name
        with h5py.File(path, "r") as f:
            qq, kk, vv = (read_tensor(f["entries"][name][n]) for n in "qkv")
        got = reference_attention(qq, kk, vv, bool(causal), 0.25, window)
        np.testing.assert_allclose(got, out.double().numpy(), rtol=0, atol=2e-6)
        # Without the window the recomputation differs: the comparison can fail.
        assert np.abs(reference_attention(qq, kk, vv, bool(causal), 0.25) - out.double().numpy()).max() > 1e-3


def test_masks_the_format_cannot_describe_are_named(tmp_path):
    gen = torch.Generator().manual_seed(22)
    q, k, v = (torch.randn(2, 2, 24, 16, generator=gen) for _ in range(3))
    padding = torch.ones(2, 1, 24, 24, dtype=torch.bool)
    padding[1, :, :, 20:] = False  # the second sequence is 20 tokens long
    bias = torch.arange(24.0)[None, :] - torch.arange(24.0)[:, None]  # ALiBi-like

    class Block(torch.nn.Module):
        def forward(self, x, mask):
            return F.scaled_dot_product_attention(x, k, v, attn_mask=mask)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Block()

        def forward(self, x, mask):
            return self.attn(x, mask)

    model = Net()
    with SpargeCapture(str(tmp_path / "other.h5")) as cap:
        with pytest.warns(RuntimeWarning, match=r"c000_s000 \(no module\): the attention mask is a mask "
                                                 r"\(2, 1, 24, 24\) that differs between batch items"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=padding)
        with pytest.warns(RuntimeWarning, match=r"\(attn\): the attention mask is an additive float mask "
                                                 r"\(24, 24\) holding a bias"):
            model(q, bias)
    assert entry_attrs(tmp_path / "other.h5", cap.entries[1])["attn_mask"].startswith("other: an additive")
    with SpargeCapture(str(tmp_path / "strict.h5"), strict=True):
        with pytest.raises(ValueError, match="differs between batch items"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=padding)


def test_storage_precision_is_measured_when_values_change(tmp_path):
    gen = torch.Generator().manual_seed(23)
    q = torch.randn(1, 2, 64, 32, generator=gen) * 4
    k = torch.randn(1, 2, 64, 32, generator=gen) * 40  # large keys: rounding moves the scores a lot
    v = torch.randn(1, 2, 64, 32, generator=gen)
    path = tmp_path / "precision.h5"
    with SpargeCapture(str(path), dtype="float16") as cap:
        with pytest.warns(RuntimeWarning, match=r"storing float32 as float16 changes the attention output by .*"
                                                 r"Pass dtype=\"auto\" \(keeps float32\)"):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
    a = entry_attrs(path, cap.entries[0])
    # Independent check of the stored error figures: numpy float64 on the same tensors.
    for name, t in (("q", q), ("k", k), ("v", v)):
        x = t.double().numpy()
        want = np.linalg.norm(x.astype(np.float16).astype(np.float64) - x) / np.linalg.norm(x)
        assert math.isclose(a[f"rel_error_{name}"], want, rel_tol=1e-6)
    exact = reference_attention(q.double().numpy(), k.double().numpy(), v.double().numpy(), True, 32 ** -0.5)
    rounded = reference_attention(*(t.half().double().numpy() for t in (q, k, v)), True, 32 ** -0.5)
    want_out = np.linalg.norm(rounded - exact) / np.linalg.norm(exact)
    assert math.isclose(a["rel_error_out"], want_out, rel_tol=1e-3) and a["rel_error_out"] > 1e-3
    # "auto" keeps the compute dtype and measures nothing: float32 stays float32, bfloat16 stays bfloat16.
    with SpargeCapture(str(tmp_path / "auto.h5")) as cap:
        F.scaled_dot_product_attention(q, k, v)
        F.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())
    with h5py.File(tmp_path / "auto.h5", "r") as f:
        g0, g1 = (f["entries"][n] for n in cap.entries)
        assert g0["q"].dtype == np.float32 and g1["q"].attrs["dtype"] == "bfloat16"
        assert not any(key.startswith("rel_error") for key in list(g0.attrs) + list(g1.attrs))
        np.testing.assert_array_equal(read_tensor(g1["k"]), k.bfloat16().double().numpy())


def tiny_gemma3(window=16):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(99)
    cfg = Gemma3TextConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=window,
                           layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                           max_position_embeddings=256, query_pre_attn_scalar=16)
    cfg._attn_implementation = "sdpa"
    return Gemma3ForCausalLM(cfg).eval().to(DEVICE)


@pytest.mark.parametrize("tokens", [48, 12])
def test_sliding_window_layers_record_their_window(tmp_path, tokens):
    model = tiny_gemma3(window=16)
    ids = torch.randint(0, 101, (1, tokens), generator=torch.Generator().manual_seed(4)).to(DEVICE)
    outs, handles = {}, []
    for i, layer in enumerate(model.model.layers):
        handles.append(layer.self_attn.o_proj.register_forward_pre_hook(
            lambda _m, inp, i=i: outs.__setitem__(i, inp[0].detach().clone())))
    path = tmp_path / "gemma.h5"
    try:
        with torch.no_grad(), SpargeCapture(str(path)) as cap:
            model(ids)
    finally:
        for h in handles:
            h.remove()
    assert cap.entries == ["l00_s000", "l01_s000", "l02_s000"]
    for i, name in enumerate(cap.entries):
        a = entry_attrs(path, name)
        window = [15, 0] if i != 1 else None  # sliding_window 16: query t sees keys t-15 .. t
        assert a.get("window") == window and int(a["causal"]) == 1, (name, a)
        # With 12 tokens no mask is needed (the window covers everything); the module's window is recorded.
        assert a["attn_mask"] == ("window" if window else "causal")
        with h5py.File(path, "r") as f:
            q, k, v = (read_tensor(f["entries"][name][n]) for n in "qkv")
        got = reference_attention(q, k, v, True, float(a["scale"]), window)
        want = outs[i].double().cpu().numpy().reshape(1, tokens, 4, 16).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)
        if window and tokens > 16:
            assert np.abs(reference_attention(q, k, v, True, float(a["scale"])) - want).max() > 1e-3


def test_whole_encoder_decoder_model_in_one_block(tmp_path):
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(5)
    cfg = WhisperConfig(vocab_size=120, num_mel_bins=8, d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=48,
                        decoder_ffn_dim=48, max_source_positions=20, max_target_positions=32,
                        decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg._attn_implementation = "sdpa"
    model = WhisperForConditionalGeneration(cfg).eval().to(DEVICE)
    feats = torch.randn(1, 8, 40, generator=torch.Generator().manual_seed(6)).to(DEVICE)
    dec = torch.randint(3, 120, (1, 9), generator=torch.Generator().manual_seed(7)).to(DEVICE)
    outs, handles = {}, []
    for name, m in model.named_modules():
        if name.endswith(("self_attn", "encoder_attn")):
            handles.append(m.out_proj.register_forward_pre_hook(
                lambda _m, inp, name=name: outs.__setitem__(name, inp[0].detach().clone())))
    path = tmp_path / "whisper.h5"
    try:
        with torch.no_grad(), SpargeCapture(str(path)) as cap:
            model(input_features=feats, decoder_input_ids=dec)
    finally:
        for h in handles:
            h.remove()
    want = {  # name: (module, kind, stack, layer, causal, Nq, Nkv)
        "enc_l00_s000": ("model.encoder.layers.0.self_attn", "self", "encoder", 0, 0, 20, 20),
        "enc_l01_s000": ("model.encoder.layers.1.self_attn", "self", "encoder", 1, 0, 20, 20),
        "dec_l00_s000": ("model.decoder.layers.0.self_attn", "self", "decoder", 0, 1, 9, 9),
        "dec_l00_cross_s000": ("model.decoder.layers.0.encoder_attn", "cross", "decoder", 0, 0, 9, 20),
        "dec_l01_s000": ("model.decoder.layers.1.self_attn", "self", "decoder", 1, 1, 9, 9),
        "dec_l01_cross_s000": ("model.decoder.layers.1.encoder_attn", "cross", "decoder", 1, 0, 9, 20),
    }
    assert cap.entries == list(want)
    for name, (module, kind, stack, layer, causal, nq, nkv) in want.items():
        a = entry_attrs(path, name)
        assert (a["module"], a["kind"], a["stack"], int(a["layer"]), int(a["causal"])) == \
            (module, kind, stack, layer, causal), name
        assert float(a["scale"]) == 1.0  # Whisper scales q itself and passes scaling=1.0
        with h5py.File(path, "r") as f:
            q, k, v = (read_tensor(f["entries"][name][n]) for n in "qkv")
        assert q.shape[2] == nq and k.shape[2] == nkv
        got = reference_attention(q, k, v, bool(causal), 1.0)
        ref = outs[module].double().cpu().numpy().reshape(1, nq, 2, 16).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5)
    info = sparge_info(path)
    if info is not None:
        for name, (module, kind, stack, *_rest) in want.items():
            assert any(name in line and module in line and kind in line and stack in line
                       for line in info.splitlines()), name


class JointBlock(torch.nn.Module):
    """A DiT-style block: text and image tokens projected separately, attended jointly with SDPA."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.attn = torch.nn.ModuleDict({"img_qkv": torch.nn.Linear(dim, 3 * dim),
                                         "txt_qkv": torch.nn.Linear(dim, 3 * dim)})
        self.out = None

    def forward(self, img, txt):
        b, dim = img.shape[0], img.shape[-1]
        qkv = torch.cat([self.attn["txt_qkv"](txt), self.attn["img_qkv"](img)], dim=1)
        q, k, v = (t.reshape(b, -1, self.heads, dim // self.heads).transpose(1, 2) for t in qkv.chunk(3, -1))
        self.out = F.scaled_dot_product_attention(q, k, v)
        return img + self.out.transpose(1, 2).reshape(b, -1, dim)[:, txt.shape[1]:]


class TinyDiT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([JointBlock(), JointBlock()])

    def forward(self, img, txt):
        for block in self.blocks:
            img = block(img, txt)
        return img


def test_dit_joint_attention_over_30_steps(tmp_path):
    torch.manual_seed(8)
    model = TinyDiT().to(DEVICE)
    img = torch.randn(1, 48, 32, generator=torch.Generator().manual_seed(9)).to(DEVICE)
    txt = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(10)).to(DEVICE)
    path = tmp_path / "dit.h5"
    kept = {}
    with torch.no_grad(), SpargeCapture(str(path), steps=[0, 15, 29]) as cap:
        for step in range(30):
            x = model(img, txt)
            for i, block in enumerate(model.blocks):
                kept[(i, step)] = block.out.clone()
            img = img - 0.05 * x  # a toy denoising update
            cap.next_step()
    assert cap.entries == [f"l{i:02d}_s{s:03d}" for s in (0, 15, 29) for i in (0, 1)]
    for name in cap.entries:
        layer, step = int(name[1:3]), int(name[-3:])
        a = entry_attrs(path, name)
        assert (a["module"], a["kind"], int(a["causal"]), int(a["step"])) == (f"blocks.{layer}", "self", 0, step)
        assert "stack" not in a and "window" not in a
        with h5py.File(path, "r") as f:
            q, k, v = (read_tensor(f["entries"][name][n]) for n in "qkv")
        assert q.shape == (1, 2, 64, 16)  # 16 text + 48 image tokens, joint
        np.testing.assert_allclose(reference_attention(q, k, v, False, 16 ** -0.5),
                                   kept[(layer, step)].double().cpu().numpy(), rtol=0, atol=2e-6)


def test_package_installs_and_imports_from_anywhere(tmp_path):
    # A copy of the package source, so that the build leaves nothing in the repository.
    src = tmp_path / "src"
    shutil.copytree(Path(__file__).resolve().parents[2] / "captures", src,
                    ignore=shutil.ignore_patterns("*.h5", "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(src)], capture_output=True, text=True, timeout=300)
    if res.returncode != 0 and "No module named" in res.stderr and "setuptools" in res.stderr:
        pytest.skip("setuptools is not installed for this Python: cannot build the package offline")
    assert res.returncode == 0, res.stderr
    code = "import sparge_capture, sys; print(sparge_capture.__file__); print(sparge_capture.SpargeCapture.__name__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [str(target / "sparge_capture" / "__init__.py"), "SpargeCapture"]
