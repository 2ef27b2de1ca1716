"""Capture entries as tensors, and the masks v1 file (captures/FORMAT.md): written atomically by the reference
engine's command line, and read back as the `mask_id` tensor of SpargeAttn's block-sparse API."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import h5py
import numpy as np
import torch

MASKS_VERSION = 1


@dataclass
class CaptureEntry:
    name: str
    q: torch.Tensor  # [B, Hq, Nq, D] in the stored dtype (float16, bfloat16 or float32), layout HND
    k: torch.Tensor
    v: torch.Tensor
    causal: bool
    window: Optional[Tuple[int, int]]
    scale: Optional[float]  # None: 1/sqrt(D)
    attrs: Dict[str, object] = field(default_factory=dict)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _tensor(ds) -> torch.Tensor:
    raw = ds[...]
    if raw.dtype in (np.uint16, np.int16) and _text(ds.attrs.get("dtype", "")) == "bfloat16":
        return torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16)
    if raw.dtype not in (np.float16, np.float32):
        raise ValueError(f"{ds.name}: unsupported dtype {raw.dtype} (float16, float32 or bfloat16 bits)")
    return torch.from_numpy(np.ascontiguousarray(raw).astype(raw.dtype.newbyteorder("=")))


def entry_names(path: str) -> List[str]:
    with h5py.File(path, "r") as f:
        if "entries" not in f:
            raise ValueError(f"{path}: no /entries group (not a capture v1 file)")
        return list(f["entries"].keys())


def read_entry(path: str, name: str) -> CaptureEntry:
    with h5py.File(path, "r") as f:
        if int(f.attrs.get("sparge_capture_version", -1)) != 1:
            raise ValueError(f"{path}: not a capture v1 file (root attribute sparge_capture_version)")
        if name not in f.get("entries", {}):
            raise ValueError(f"{path}: no entry {name!r} (entries: {', '.join(list(f['entries'])[:12])})")
        g = f["entries"][name]
        q, k, v = (_tensor(g[x]) for x in ("q", "k", "v"))
        attrs = {key: g.attrs[key] for key in g.attrs}
    if _text(attrs.get("layout", "HND")) == "NHD":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    window = tuple(int(x) for x in np.asarray(attrs["window"]).ravel()) if "window" in attrs else None
    scale = float(np.asarray(attrs["scale"]).ravel()[0]) if "scale" in attrs else None
    causal = bool(int(np.asarray(attrs.get("causal", 0)).ravel()[0]))
    return CaptureEntry(name, q, k, v, causal, window, scale, attrs)


def _write_group(g: h5py.Group, result, entry: CaptureEntry, config: dict, params: dict) -> None:
    for label, data in (("block_mask", result.block_mask), ("pv_skipped", result.pv_skipped)):
        arr = data.to(torch.uint8).cpu().numpy()
        g.create_dataset(label, data=arr, chunks=(1, 1) + arr.shape[2:], compression="gzip", compression_opts=4)
    bq, bk = result.geometry
    g.attrs["block_q"], g.attrs["block_k"], g.attrs["geometry"] = np.int64(bq), np.int64(bk), f"{bq}x{bk}"
    for key in ("numerics", "target", "engine"):
        g.attrs[key] = config[key]
    for key in ("smooth_k", "sink", "diagonal"):
        g.attrs[key] = np.int64(int(config[key]))
    g.attrs["causal"] = np.int64(int(entry.causal))
    for key in ("window", "module", "kind", "stack"):
        if key in entry.attrs:
            g.attrs[key] = entry.attrs[key]
    g.attrs["heads_present"] = np.ones(entry.q.shape[1])
    for key, value in params.items():
        g.attrs[key] = value
    for key, value in result.sparsity_with_area().items():
        g.attrs[key] = float(value)


def write_masks(path: str, runs: List[tuple]) -> None:
    """Masks v1 for runs [(entry, result, config, params)], written to a temporary file beside `path`, then
    renamed over it (never a half-written file, never over an input)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".masks-", suffix=".h5.tmp", dir=directory)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["sparge_masks_version"] = np.int64(MASKS_VERSION)
            entries = f.create_group("entries")
            for entry, result, config, params in runs:
                _write_group(entries.create_group(entry.name), result, entry, config, params)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def params_attrs(mode: str, theta, tau, topk, lam, sparse) -> dict:
    """The parameter attributes: scalars when every head has the same, else float arrays [Hq]."""
    columns = {"simthreshd1": theta, "pvthreshd": lam, "is_sparse": sparse.double(),
               ("cdfthreshd" if mode == "cdf" else "topk"): tau if mode == "cdf" else topk}
    if all(bool((c == c[0]).all()) for c in columns.values()):
        out = {"mode": mode}
        out.update({k: float(v[0]) for k, v in columns.items()})
        out["is_sparse"] = np.int64(int(out["is_sparse"]))
        return out
    out = {k: v.double().numpy() for k, v in columns.items()}
    other = "topk" if mode == "cdf" else "cdfthreshd"
    out[other] = np.full(len(theta), math.nan)
    return out


def load_mask_id(path: str, entry: str, block: Optional[Tuple[int, int]] = None, device="cuda") -> torch.Tensor:
    """The block mask of `entry` in a masks v1 file as the `mask_id` tensor of SpargeAttn's
    block_sparse_sage2_attn_cuda: int32 [B, H, q_blocks, k_blocks], contiguous, on `device`. `block` is the
    (query, key) tile of the GPU that will run it (128x64; 64x128 on sm90; default: that of the current CUDA
    device); a file made at another geometry is refused, since its blocks would cover other tokens."""
    if block is None:
        if not torch.cuda.is_available():
            raise ValueError("load_mask_id: no CUDA device to take the tile geometry from; pass block=(128, 64) "
                             "or block=(64, 128) (sm90)")
        block = (64, 128) if torch.cuda.get_device_capability()[0] == 9 else (128, 64)
    with h5py.File(path, "r") as f:
        if int(f.attrs.get("sparge_masks_version", -1)) != MASKS_VERSION:
            raise ValueError(f"{path}: not a masks v1 file (root attribute sparge_masks_version)")
        if entry not in f.get("entries", {}):
            raise ValueError(f"{path}: no entry {entry!r} (entries: {', '.join(list(f['entries'])[:12])})")
        g = f["entries"][entry]
        have = (int(g.attrs["block_q"]), int(g.attrs["block_k"]))
        if have != tuple(block):
            raise ValueError(
                f"{path}:/entries/{entry}: the masks were made with {have[0]}x{have[1]} tiles, but the kernel "
                f"uses {block[0]}x{block[1]} (SpargeAttn: 64x128 on sm90, 128x64 elsewhere); re-export them "
                f"with `sparge run --block {block[0]}x{block[1]} --masks ...`")
        mask = g["block_mask"][...]
    return torch.from_numpy(mask.astype(np.int32)).contiguous().to(device)
