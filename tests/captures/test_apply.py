"""SpargeApply and sparge_capture.evaluate on small random models: every call the parameter file covers runs
sparse through the reference engine (its output checked against reference.attention on the same Q/K/V), every
other call dense and listed with why; and every bad input gets a clear error: a parameter file from another model,
an interrupted one, a model whose attention the hook cannot see, engines that are not installed, a masks file at
the wrong tile geometry."""

import json
import os
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
h5py = pytest.importorskip("h5py")

from sparge_capture import (EngineUnavailable, ParamsError, SpargeApply, SpargeApplyError, SpargeCapture,  # noqa: E402
                            load_mask_id, read_params, reference)
from sparge_capture.evaluate import evaluate  # noqa: E402

HQ, HKV, D, LAYERS, TOKENS = 4, 2, 32, 3, 160


def tiny_llama(impl="sdpa", head_dim=D):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(5)
    cfg = LlamaConfig(vocab_size=61, hidden_size=HQ * head_dim, intermediate_size=64, num_hidden_layers=LAYERS,
                      num_attention_heads=HQ, num_key_value_heads=HKV, head_dim=head_dim,
                      max_position_embeddings=512)
    cfg._attn_implementation = impl
    return LlamaForCausalLM(cfg).eval()


def params_file(path, entries=("l00_s000", "l02_s000"), heads=HQ, complete=True, capture="", drop_head=None,
                numerics="int8-fp8"):
    groups = []
    for e in entries:
        hs = [{"head": h, "is_sparse": h != 3, "simthreshd1": -0.1, "cdfthreshd": round(0.6 + 0.1 * (h % 4), 2),
               "pvthreshd": 2.0, **({"numerics": "none"} if h == 1 else {})} for h in range(heads) if h != drop_head]
        layer = re.search(r"l(\d+)_", e)
        groups.append({"name": e, "entries": [e], "layer": int(layer.group(1)) if layer else None, "heads_q": heads,
                       "complete": drop_head is None, "heads": hs})
    p = {"sparge_params_version": 1, "generator": "sparge tune", "complete": complete, "capture": capture,
         "mode": "cdf", "l1": 0.05, "l2": 0.06, "geometry": "128x64", "numerics": numerics, "smooth_k": True,
         "sink": True, "diagonal": False, "groups": groups}
    with open(path, "w") as f:
        json.dump(p, f)
    return str(path)


def ids(seed=0):
    return torch.randint(0, 61, (1, TOKENS), generator=torch.Generator().manual_seed(seed))


def test_matched_calls_run_sparse_and_equal_the_reference(tmp_path):
    model = tiny_llama()
    with torch.no_grad(), SpargeCapture(str(tmp_path / "c.h5")):
        dense = model(ids()).logits
    p = params_file(tmp_path / "p.json", capture=str(tmp_path / "c.h5"))
    with torch.no_grad(), SpargeApply(model, p, measure=True) as sa:
        sparse = model(ids()).logits
    assert set(sa.summary.sparse) == {"l00_s000", "l02_s000"}
    assert [d.module for d in sa.summary.dense.values()] == ["model.layers.1.self_attn"]
    assert "no group in the parameter file matches" in sa.summary.text()
    assert "3 (tuned dense (is_sparse false))" in sa.summary.text()
    assert not torch.equal(dense, sparse)
    # layer 0's sparse output equals reference.attention on the captured Q/K/V with the file's per-head values
    with h5py.File(tmp_path / "c.h5") as f:
        q, k, v = (torch.from_numpy(f[f"entries/l00_s000/{x}"][...]) for x in "qkv")
    want = reference.attention(q, k, v, simthreshd1=-0.1, cdfthreshd=[0.6, 0.7, 0.8, 0.9], pvthreshd=2.0,
                               is_sparse=[True, True, True, False], numerics=["int8-fp8", "none", "int8-fp8",
                                                                              "int8-fp8"], causal=True, sink=True,
                               measure=True)
    stats = sa.take_stats()["l00_s000"].stats
    assert torch.equal(stats.selected, want.counts["selected"])
    assert torch.allclose(stats.abs_diff / stats.abs_ref, want.l1, rtol=1e-6)


def test_sparge_engine_without_counts_deploys_the_same_output(tmp_path):
    """The "sparge" engine (this build's library; its CPU engine here) with counts=False, SpargeApply's deployment
    setting: the model's output equals the counted run's, nothing is recorded for take_stats() while the summary
    still lists what ran sparse; the counted run records the kernels' counts. measure=True without counts is
    refused."""
    pytest.importorskip("sparge_attn")
    model = tiny_llama(head_dim=64)  # a head size the kernels run
    p = params_file(tmp_path / "p.json")
    with torch.no_grad(), SpargeApply(model, p, engine="sparge") as counted:
        want = model(ids()).logits
    with torch.no_grad(), SpargeApply(model, p, engine="sparge", counts=False) as deployed:
        got = model(ids()).logits
    assert torch.equal(got, want)
    assert set(deployed.summary.sparse) == set(counted.summary.sparse) == {"l00_s000", "l02_s000"}
    assert deployed.take_stats() == {}
    stats = counted.take_stats()["l00_s000"].stats
    assert int(stats.selected.sum()) > 0 and torch.all(stats.selected <= stats.counts[:, 0])
    with pytest.raises(ValueError, match="measure=True .* needs counts=True"):
        SpargeApply(model, p, engine="sparge", counts=False, measure=True)


def test_heads_from_another_model_are_refused(tmp_path):
    p = params_file(tmp_path / "p.json", heads=9)
    with pytest.raises(SpargeApplyError, match=r"model.layers.0.self_attn \(entry l00_s000\) has 4 query heads.*"
                                               r"tuned for 9"):
        with torch.no_grad(), SpargeApply(tiny_llama(), p):
            tiny_llama()(ids())


def test_entries_from_another_model_are_refused(tmp_path):
    p = params_file(tmp_path / "p.json", entries=("l07_s000",))
    with pytest.raises(SpargeApplyError, match="no attention call of this model matched.*l07_s000"):
        with torch.no_grad(), SpargeApply(None, p):
            tiny_llama()(ids())


def test_same_names_from_another_module_do_not_match(tmp_path):
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["sparge_capture_version"] = 1
        for e in ("l00_s000", "l02_s000"):
            f.create_group(f"entries/{e}").attrs["module"] = f"transformer.h.{e[2]}.attn"
    p = params_file(tmp_path / "p.json", capture="other.h5")  # relative to the parameter file
    with pytest.raises(SpargeApplyError, match="no attention call"):
        with torch.no_grad(), SpargeApply(None, p) as sa:
            tiny_llama()(ids())
    assert "captured from module transformer.h.0.attn" in sa.summary.text()


def test_interrupted_file_needs_consent_and_lists_what_runs_dense(tmp_path):
    p = params_file(tmp_path / "p.json", complete=False, drop_head=2)
    with pytest.raises(SpargeApplyError, match=r"interrupted.*allow_incomplete=True.*heads 2 missing"):
        SpargeApply(None, p)
    with torch.no_grad(), SpargeApply(None, p, allow_incomplete=True) as sa:
        tiny_llama()(ids())
    assert "2 (no parameters in the file" in sa.summary.text()


def test_eager_attention_is_explained(tmp_path):
    p = params_file(tmp_path / "p.json")
    model = tiny_llama("eager")
    with pytest.raises(SpargeApplyError, match='"eager" attention.*attn_implementation="sdpa"'):
        with torch.no_grad(), SpargeApply(model, p):
            model(ids())


def test_short_calls_and_gradients_run_dense(tmp_path):
    p = params_file(tmp_path / "p.json")
    with torch.no_grad(), SpargeApply(None, p, strict=False) as sa:
        tiny_llama()(ids()[:, :100])
    assert not sa.summary.sparse
    assert "100 queries (SpargeAttn needs at least 128" in sa.summary.text()


def test_bad_files_and_missing_engines(tmp_path):
    bad = json.load(open(params_file(tmp_path / "p.json")))
    bad["groups"][0]["heads"][1]["cdfthreshd"] = 1.5
    with open(tmp_path / "bad.json", "w") as f:
        json.dump(bad, f)
    with pytest.raises(ParamsError, match=r"bad.json:/groups/0/heads/1/cdfthreshd: must be in \[0, 1\]"):
        read_params(str(tmp_path / "bad.json"))
    with pytest.raises(ParamsError, match="not valid JSON"):
        (tmp_path / "t.json").write_text("{")
        read_params(str(tmp_path / "t.json"))
    p = params_file(tmp_path / "p.json")
    import importlib.util
    if importlib.util.find_spec("sparge_attn") is None:
        with pytest.raises(EngineUnavailable, match="sparge_attn, which is not installed"):
            SpargeApply(None, p, engine="sparge")
    with pytest.raises(EngineUnavailable, match="spas_sage_attn|CUDA"):
        SpargeApply(None, p, engine="spargeattn")


def test_mask_id_refuses_another_geometry(tmp_path):
    q = torch.randn(1, 2, 256, 16)
    r = reference.attention(q, q[:, :1], q[:, :1], simthreshd1=-1.0, cdfthreshd=0.5)
    from sparge_capture.maskfile import CaptureEntry, write_masks
    e = CaptureEntry("l0", q, q[:, :1], q[:, :1], False, None, None)
    cfg = {"numerics": "none", "target": "none", "engine": "reference", "smooth_k": 1, "sink": 0, "diagonal": 0}
    write_masks(str(tmp_path / "m.h5"), [(e, r, cfg, {"mode": "cdf"})])
    mask = load_mask_id(str(tmp_path / "m.h5"), "l0", block=(128, 64), device="cpu")
    assert mask.dtype == torch.int32 and mask.shape == (1, 2, 2, 4) and torch.equal(mask.bool(), r.block_mask)
    with pytest.raises(ValueError, match="made with 128x64 tiles, but the kernel uses 64x128"):
        load_mask_id(str(tmp_path / "m.h5"), "l0", block=(64, 128), device="cpu")
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


class Tok:
    def __call__(self, text):
        return type("T", (), {"input_ids": [ord(c) % 61 for c in text]})()


def test_evaluate_writes_eval_json(tmp_path):
    model = tiny_llama()
    p = params_file(tmp_path / "p.json")
    texts = [{"name": "a", "text": "the quick brown fox " * 10}, "jumps over the lazy dog " * 8]
    r = evaluate(model, Tok(), p, texts, max_tokens=TOKENS)
    saved = json.load(open(tmp_path / "p.eval.json"))
    assert saved == json.loads(json.dumps(r))
    assert (r["sparge_eval_version"], r["engine"], r["numerics"], r["model"]["kind"]) == (1, "reference",
                                                                                           "int8-fp8", "causal-lm")
    s = r["summary"]
    assert s["metric"] == "perplexity" and s["inputs"] == 2 and 0 <= s["top1_agreement"] <= 1 and s["mean_kl"] >= 0
    assert s["relative_change"] == pytest.approx(s["sparse"] / s["dense"] - 1)
    assert [i["tokens"] for i in r["inputs"]] == [TOKENS, TOKENS]
    heads = {(h["entry"], h["head"]): h for h in r["heads"]}
    assert len(heads) == 2 * HQ and heads[("l00_s000", 1)]["numerics"] == "none"
    assert heads[("l00_s000", 3)]["dense"] and heads[("l00_s000", 3)]["sparsity"] == 0.0
    for h in heads.values():
        assert h["l1_max"] >= h["l1"] - 1e-12 and h["over_budget"] == (h["l1_max"] > 0.06) and h["inputs"] == 2
    assert {c["entry"] for c in r["calls"]["sparse"]} == {"l00_s000", "l02_s000"}
    assert r["calls"]["dense"] == [{"module": "model.layers.1.self_attn", "calls": 2,
                                    "why": "no group in the parameter file matches"}]


class FakePipeline:
    """A diffusers-like pipeline: a few denoising steps of one attention module over a seeded latent."""

    def __init__(self):
        torch.manual_seed(0)
        self.attn = torch.nn.MultiheadAttention(32, 2, batch_first=True)

    def __call__(self, prompt, generator, output_type, callback_on_step_end=None):
        x = torch.randn(1, 160, 32, generator=generator)
        for i in range(3):
            q = x.view(1, 160, 2, 16).transpose(1, 2)
            x = x + 0.5 * torch.nn.functional.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(1, 160, 32)
            if callback_on_step_end:
                callback_on_step_end(self, i, 0, {})
        img = torch.sigmoid(x.view(1, 40, 128)).permute(1, 2, 0).numpy()
        return type("Out", (), {"images": [img]})()


def test_evaluate_diffusion_lightly(tmp_path):
    groups = ["c000_s000"]  # calls outside any module are named by call index: matched by name only
    p = params_file(tmp_path / "p.json", entries=groups, heads=2)
    pf = read_params(p)
    pf.groups[0].layer = None
    r = evaluate(FakePipeline(), None, pf, ["a cat"], kind="diffusion", out="", steps="exact")
    assert r["calls"]["sparse"] == [{"module": "no module", "entry": "c000_s000", "calls": 1}]
    assert r["calls"]["dense"] == [{"module": "no module", "calls": 2, "why": "its module was tuned at step(s) [0] "
                                    "only (steps='nearest' uses the nearest tuned step)"}]
    r = evaluate(FakePipeline(), None, pf, ["a cat", "a dog"], kind="diffusion", out="")
    assert r["summary"]["metric"] == "psnr" and 0 < r["summary"]["ssim"] <= 1
    assert [i["name"] for i in r["inputs"]] == ["input 0", "input 1"]
    # steps 1 and 2 use step 0's parameters (the nearest tuned step), for both prompts
    assert [(c["entry"], c["calls"]) for c in r["calls"]["sparse"]] == [("c000_s000", 2)] * 3
    assert not r["calls"]["dense"]


def fake_spargeattn(monkeypatch, capability):
    """SpargeAttn's API stood in by the reference engine on the CPU, recording what it was called with."""
    import sys
    import types
    calls = []

    def meansim(q, k, v, **kw):
        calls.append(dict(kw, q=q, k=k))
        return reference.attention(q, k, v, simthreshd1=kw["simthreshd1"].double(),
                                   cdfthreshd=kw["cdfthreshd"].double(), pvthreshd=kw["pvthreshd"].double(),
                                   numerics="int8-fp16", causal=kw["is_causal"], scale=kw["scale"],
                                   smooth_k=kw["smooth_k"], sink=kw["attention_sink"]).output.half()

    fake = types.ModuleType("spas_sage_attn")
    fake.spas_sage_attn_meansim_cuda = fake.spas_sage2_attn_meansim_cuda = meansim
    monkeypatch.setitem(sys.modules, "spas_sage_attn", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    return calls


def test_spargeattn_engine_passes_per_head_tensors(tmp_path, monkeypatch):
    calls = fake_spargeattn(monkeypatch, (9, 0))
    p = params_file(tmp_path / "p.json", numerics="int8-fp16")
    model = tiny_llama(head_dim=64)  # SpargeAttn's head dims: 64 and 128
    with torch.no_grad(), SpargeApply(model, p, engine="spargeattn", device="cpu", measure=True) as sa:
        model(ids())
    assert len(calls) == 2 and set(sa.summary.sparse) == {"l00_s000", "l02_s000"}
    kw = calls[0]
    assert kw["k"].shape[1] == HQ  # K and V repeated to the query heads: upstream's Stage 1 has no GQA
    assert kw["simthreshd1"].dtype == torch.float32 and kw["simthreshd1"].tolist() == pytest.approx(
        [-0.1, -0.1, -0.1, 1.0])  # head 3 is dense: θ = τ = 1, PV skip off
    assert kw["cdfthreshd"].tolist() == pytest.approx([0.6, 0.7, 0.8, 1.0])
    assert kw["pvthreshd"].tolist() == pytest.approx([2.0, 2.0, 2.0, 1e30])
    assert kw["is_causal"] is True and kw["attention_sink"] is True and kw["tensor_layout"] == "HND"


def test_spargeattn_engine_refuses_what_it_cannot_run(tmp_path, monkeypatch):
    fake_spargeattn(monkeypatch, (9, 0))
    with pytest.raises(EngineUnavailable, match="tuned with 128x64 tiles.*use 64x128 on this GPU"):
        SpargeApply(None, params_file(tmp_path / "p.json"), engine="spargeattn", device="cpu")
    p = json.load(open(params_file(tmp_path / "p.json")))
    p["geometry"] = "64x128"
    with open(tmp_path / "q.json", "w") as f:
        json.dump(p, f)
    with pytest.raises(SpargeApplyError, match="causal call with int8-fp8 parameters.*--target sm80"):
        with torch.no_grad(), SpargeApply(None, str(tmp_path / "q.json"), engine="spargeattn", device="cpu"):
            tiny_llama(head_dim=64)(ids())
    with pytest.raises(EngineUnavailable, match="always quantized"):
        SpargeApply(None, params_file(tmp_path / "n.json", numerics="none"), engine="spargeattn", device="cpu")


class Chars:
    def decode(self, ids):
        return " ".join(f"w{i % 7}" for i in ids)


def test_evaluate_speech_lightly(tmp_path):
    """A small random Whisper (2 encoder layers over 3 s of audio: 150 frames): the encoder runs sparse, the
    decoder's one-query steps dense; transcripts, WER and token agreement are reported."""
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration
    torch.manual_seed(2)
    cfg = WhisperConfig(vocab_size=64, num_mel_bins=80, d_model=64, encoder_layers=2, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_source_positions=150, max_target_positions=64,
                        decoder_start_token_id=1, eos_token_id=2, pad_token_id=2, bos_token_id=2)
    model = WhisperForConditionalGeneration(cfg).eval()
    model.config._attn_implementation = "sdpa"
    p = params_file(tmp_path / "p.json", entries=("enc_l00_s000", "enc_l01_s000"), heads=2)
    audio = [torch.randn(16000, generator=torch.Generator().manual_seed(i)).numpy() * 0.1 for i in range(2)]
    r = evaluate(model, (WhisperFeatureExtractor(feature_size=80, chunk_length=3), Chars()), p,
                 [{"name": "a", "audio": audio[0], "text": "w1 w2 w3"}, audio[1]], max_new_tokens=6)
    s = r["summary"]
    assert r["model"]["kind"] == "speech-seq2seq" and s["metric"] == "wer" and s["inputs"] == 2
    assert 0 <= s["wer_vs_dense"] and 0 <= s["token_agreement"] <= 1
    assert {c["entry"] for c in r["calls"]["sparse"]} == {"enc_l00_s000", "enc_l01_s000"}
    assert any("queries (SpargeAttn needs at least 128" in c["why"] for c in r["calls"]["dense"])
    assert "wer_dense" in r["inputs"][0]["metrics"] and "wer_dense" not in r["inputs"][1]["metrics"]
    assert {h["entry"] for h in r["heads"]} == {"enc_l00_s000", "enc_l01_s000"} and len(r["heads"]) == 4
