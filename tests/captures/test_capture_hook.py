"""Tests of captures/sparge_capture.py: what it records is what the attention kernel computed with.

Runs where torch and transformers are installed (skips otherwise). The expected attention comes from
the model itself (a forward hook on o_proj's input) or from torch's SDPA, and is compared with
attention recomputed in float64 from the captured Q/K/V, so a wrong layout, head order, GQA mapping,
rotary placement, causal flag or scale fails.

With SPARGE_BIN set to the sparge CLI, the files are also opened with the C++ reader (`sparge info`).
SPARGE_TEST_DEVICE=cuda runs the models and SDPA calls on the GPU (captures/gpu_check.sh does both).
"""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "captures"))
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


def reference_attention(q, k, v, causal, scale):
    """Straightforward attention in float64: [B,Hq,Nq,D] x [B,Hkv,Nkv,D] -> [B,Hq,Nq,Dv]."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)  # query head h uses KV head h // group
    v = np.repeat(v, group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        nq, nk = s.shape[-2:]
        s = np.where(np.tril(np.ones((nq, nk), dtype=bool)), s, -np.inf)
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
        with torch.no_grad(), SpargeCapture(str(path), dtype="float32", attrs={"model": "tiny llama"}) as cap:
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
            assert int(g.attrs["causal"]) == 1
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
    assert kinds == [(1, "causal"), (1, "causal"), (0, "none"), (0, "other")]


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
