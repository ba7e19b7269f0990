#!/usr/bin/env python3
"""The GPU benchmark's reference points, each timed with CUDA events and
synchronisation, best of REPS:
  memcpy  one pinned host buffer of the file's size (or 4 GiB at most,
          repeated) copied with one cudaMemcpy: the link's ceiling
  st      safetensors.torch.load_file(FILE, device="cuda:0")
  pt      torch.load(PT, mmap=True) then .to("cuda:0") of every tensor
Usage: gpu_peers.py WHAT FILE [PT] [REPS]. Prints "WHAT GB/s SECONDS"."""
import os, sys, time
import torch

what, path = sys.argv[1], sys.argv[2]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
dev = torch.device("cuda:0")
size = os.path.getsize(path)
torch.cuda.init()
torch.empty(1, device=dev)  # context up before timing
best = None
if what == "memcpy":
    n = min(size, 4 << 30)
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    host[:: 1 << 20] = 1
    dst = torch.empty(n, dtype=torch.uint8, device=dev)
    dst.copy_(host, non_blocking=True)  # warm-up
    torch.cuda.synchronize()
    for _ in range(max(reps, 5)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(host, non_blocking=True)
        b.record()
        b.synchronize()
        s = a.elapsed_time(b) / 1e3
        best = s if best is None else min(best, s)
    print(f"memcpy {n / best / 1e9:.2f} {best:.4f}")
    sys.exit(0)
for _ in range(reps):
    t = time.perf_counter()
    if what == "st":
        from safetensors.torch import load_file
        sd = load_file(path, device="cuda:0")
        n = sum(v.numel() * v.element_size() for v in sd.values())
    elif what == "pt":
        sd = torch.load(sys.argv[3], mmap=True, weights_only=True)
        sd = {k: v.to(dev) for k, v in sd.items()}
        n = sum(v.numel() * v.element_size() for v in sd.values())
    torch.cuda.synchronize()
    s = time.perf_counter() - t
    del sd
    torch.cuda.empty_cache()
    best = s if best is None else min(best, s)
print(f"{what} {n / best / 1e9:.2f} {best:.4f}")
