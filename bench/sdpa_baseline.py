"""Dense attention baselines for the kernel benchmark: torch SDPA with the cuDNN and flash backends on the
same shapes (B 1, fp16, random N(0,1) inputs), CUDA-event medians, dense TFLOPS = 4·H·N²·D/t (halved when
causal). usage: python3 bench/sdpa_baseline.py --tokens 16384,32768 --dims 64,128 --causal 0,1 --heads 32"""
import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from compare_spargeattn import timed  # CUDA-event timing shared by the bench scripts


BACKENDS = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))


def median_ms(fn, repeat):
    return timed(torch, fn, repeat, warmup=1)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="16384,32768")
    ap.add_argument("--dims", default="128")
    ap.add_argument("--causal", default="0")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| N | D | causal | backend | ms | TFLOPS |\n| --- | --- | --- | --- | --- | --- |")
    for n in map(int, a.tokens.split(",")):
        for d in map(int, a.dims.split(",")):
            for c in map(int, a.causal.split(",")):
                q, k, v = (torch.randn(1, a.heads, n, d, device="cuda", dtype=torch.float16)
                           for _ in range(3))
                flops = 4 * a.heads * n * n * d * (0.5 if c else 1.0)
                for name, be in BACKENDS:
                    try:
                        with sdpa_kernel(be):
                            ms = median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, is_causal=bool(c)), a.repeat)  # noqa: B023
                        print(f"| {n} | {d} | {c} | {name} | {ms:.3f} | {flops / ms / 1e9:.0f} |", flush=True)
                    except RuntimeError as e:
                        reason = str(e).splitlines()[0][:60]
                        print(f"| {n} | {d} | {c} | {name} | n/a | {reason} |", flush=True)
                del q, k, v


if __name__ == "__main__":
    main()
