# Writes the float4_e2m1fn_x2 DCP fixtures of index/dcp's TestFloat4X2
# (f4_test.go) and EXPECTED.json. Written with torch 2.14.1+debian in the
# sid chroot (../shared/tools/debian.sh sid /srv/sid run ...):
#   r1: dcp.save in one process (no process group);
#   r2: dcp.save over 2 gloo ranks on loopback, DTensors built from each
#       rank's local shard (DTensor.from_local: torch has no copy kernel
#       for float4_e2m1fn_x2, so distribute_tensor cannot scatter it),
#       sharded along the last dimension (x2 units) and along dim 0;
#   st2: as r2 through FileSystemWriter(serialization_format=SAFETENSORS)
#       (.distcp files in the safetensors format: torch writes x2 as F4
#       with the last dimension doubled; its FileSystemReader cannot read
#       such files back, so they are checked against r2's bytes).
# Expected values come from torch's own bytes (the x2 tensor viewed as
# uint8, low nibble = even element) and the E2M1 formula.
import datetime, json, os, sys
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

X2 = torch.float4_e2m1fn_x2
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]

def f32(code):
    v = E2M1[code & 7]
    return -v if code & 8 else v

def expected(x):
    out = []
    for b in x.view(torch.uint8).reshape(-1).tolist():
        out += [f32(b & 15), f32(b >> 4)]
    return out

def f4shape(x):
    s = list(x.shape)
    return s[:-1] + [2 * s[-1]] if s else [2]

def whole():
    g = torch.Generator().manual_seed(44)
    u = lambda *s: torch.randint(0, 256, s, dtype=torch.uint8, generator=g)
    return {"w": u(8, 6).view(X2), "v": u(4, 5).view(X2), "z": u(1).view(X2)[0], "f": torch.tensor([1.5, -2.0])}

def rank_main(rank, world, out, st):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29644", USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    mesh = init_device_mesh("cpu", (world,))
    s = whole()
    w = s["w"].view(torch.uint8)[:, 3 * rank:3 * rank + 3].contiguous().view(X2)  # along the last dim
    v = s["v"].view(torch.uint8)[2 * rank:2 * rank + 2].contiguous().view(X2)     # along dim 0
    sd = {"w": DTensor.from_local(w, mesh, [Shard(1)], run_check=False),
          "v": DTensor.from_local(v, mesh, [Shard(0)], run_check=False), "z": s["z"], "f": s["f"]}
    if st:  # safetensors refuses a 0-d x2 tensor (not a whole byte of F4 elements)
        del sd["z"]
        from torch.distributed.checkpoint.filesystem import SerializationFormat
        dcp.save({"model": sd}, storage_writer=dcp.FileSystemWriter(out, serialization_format=SerializationFormat.SAFETENSORS))
    else:
        dcp.save({"model": sd}, checkpoint_id=out)
    dist.destroy_process_group()

if __name__ == "__main__":
    exp = {"torch": torch.__version__, "cases": {}}
    s = whole()
    dcp.save({"model": s}, checkpoint_id="r1")
    mp.spawn(rank_main, args=(2, "r2", False), nprocs=2, join=True)
    mp.spawn(rank_main, args=(2, "st2", True), nprocs=2, join=True)
    for case in ["r1", "r2"]:
        back = {"model": {k: torch.empty_like(v) for k, v in s.items()}}
        dcp.load(back, checkpoint_id=case)
        for k, v in s.items():
            assert torch.equal(back["model"][k].view(torch.uint8), v.view(torch.uint8)), (case, k)
        exp["cases"][case] = {"model/" + k: {"shape": f4shape(v), "f32": expected(v)} for k, v in s.items() if v.dtype == X2}
    exp["cases"]["st2"] = {k: v for k, v in exp["cases"]["r2"].items() if k != "model/z"}
    with open("EXPECTED.json", "w") as f:
        json.dump(exp, f, sort_keys=True)
        f.write("\n")
