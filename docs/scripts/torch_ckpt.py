# /usr/bin/python3 docs/scripts/torch_ckpt.py OUT.bin TOTAL_MIB N_TENSORS [legacy]
# Writes a torch.save checkpoint of N float32 tensors totalling TOTAL_MIB
# (zip format, or the legacy pre-1.6 format with "legacy").
import sys, torch
out, total, n = sys.argv[1], int(sys.argv[2]) << 20, int(sys.argv[3])
legacy = len(sys.argv) > 4
per = total // n // 4  # float32 elements per tensor
sd = {}
for i in range(n):
    t = torch.empty(per, dtype=torch.float32)
    t.fill_(i * 0.5)
    sd["model.layers.%d.weight" % i] = t.view(-1, 256) if per % 256 == 0 else t
torch.save(sd, out, _use_new_zipfile_serialization=not legacy)
