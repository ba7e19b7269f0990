"""Real clients on a tensorfs mount against the original files (issue 45).

Runs inside Debian sid's chroot (../shared/tools/debian.sh sid DIR), where
transformers, llama.cpp's tools, onnxruntime, h5py, safetensors and NumPy
are Debian's packages; real_clients.sh drives it and makes the mounts.

  python3 real_clients.py make  WORK   # the writers: a tiny random Llama, plain and sharded
  python3 real_clients.py check WORK   # transformers, safetensors, NumPy on the mounts
  python3 real_clients.py onnx  MODEL ORIG_DIR MOUNT_DIR   # onnxruntime, same outputs
  python3 real_clients.py h5    ORIG MOUNTED              # h5py, every dataset equal

Every check prints one line "ok ..." or "FAIL ..." and the script exits 1
on any FAIL.
"""
import json
import os
import sys
import time

failed = []


def say(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failed.append(what)


def make(work):
    import sentencepiece as spm
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    text = os.path.join(work, "corpus.txt")
    with open(text, "w") as f:
        words = "the a model weights mount file read tensor byte page cache lazy every served whole".split()
        for i in range(2000):
            f.write(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(work, "sp"), vocab_size=96,
                                   model_type="bpe", bos_id=1, eos_id=2, unk_id=0, pad_id=-1)
    cfg = LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    for name, max_shard in (("plain", None), ("sharded", "60KB")):
        d = os.path.join(work, name)
        if max_shard:
            model.save_pretrained(d, max_shard_size=max_shard)
        else:
            model.save_pretrained(d)
        with open(os.path.join(work, "sp.model"), "rb") as src, open(os.path.join(d, "tokenizer.model"), "wb") as dst:
            dst.write(src.read())
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f)
    for name, hidden, inter in (("fp8_full", 256, 384), ("fp8_partial", 192, 320)):
        make_fp8(work, name, hidden, inter)
    print("made", sorted(os.listdir(os.path.join(work, "sharded"))))


def make_fp8(work, name, hidden, inter, block=128):
    """A block-FP8 checkpoint as DeepSeek-V3 and Qwen3-FP8 store them:
    F8_E4M3 weights, F32 weight_scale_inv per block x block (edge blocks
    partial where the dims are not multiples of the block), quant_method
    fp8 with weight_block_size in config.json."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=96, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    d = os.path.join(work, name)
    LlamaForCausalLM(cfg).save_pretrained(d)
    out = {}
    for k, w in load_file(os.path.join(d, "model.safetensors")).items():
        if not k.endswith("proj.weight"):
            out[k] = w
            continue
        n, kk = w.shape
        bn, bk = -(-n // block), -(-kk // block)
        s = torch.zeros(bn, bk)
        q = torch.empty(w.shape, dtype=torch.float8_e4m3fn)
        for i in range(bn):
            for j in range(bk):
                blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
                s[i, j] = blk.abs().max() / 448.0
                q[i * block:(i + 1) * block, j * block:(j + 1) * block] = (blk / s[i, j]).to(torch.float8_e4m3fn)
        out[k], out[k + "_scale_inv"] = q, s
    save_file(out, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    c = json.load(open(os.path.join(d, "config.json")))
    c["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [block, block]}
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)


def fp8_reference(d, block=128):
    """The logical bf16 weights of a block-FP8 checkpoint, computed here
    in torch: codes as float32 times their block's scale, rounded once to
    bfloat16."""
    import torch
    from safetensors.torch import load_file

    sd = load_file(os.path.join(d, "model.safetensors"))
    ref = {}
    for k, w in sd.items():
        if k.endswith("_scale_inv"):
            continue
        if w.dtype == torch.float8_e4m3fn:
            s = sd[k + "_scale_inv"].repeat_interleave(block, 0).repeat_interleave(block, 1)[:w.shape[0], :w.shape[1]]
            ref[k] = (w.to(torch.float32) * s).to(torch.bfloat16)
        else:
            ref[k] = w.to(torch.bfloat16)
    return ref


def check_fp8(work):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    ids = torch.tensor([[1, 5, 9, 17, 33, 40, 41, 7]])
    for name in ("fp8_full", "fp8_partial"):
        orig, mnt = paths(work, name)
        try:
            ref = fp8_reference(orig)
            got = load_file(os.path.join(mnt, ".bf16", "model.safetensors"))
            same = set(got) == set(ref) and all(torch.equal(got[k], ref[k]) for k in ref)
            say(same, f"block FP8 {name}: MOUNT/.bf16/model.safetensors holds the weights torch computes (codes x block scale in float32, rounded to bf16): {len(got)} tensors, no scale among them")
            # the model through the mount, against one built from the reference weights
            b, gb, tb, db = logits(os.path.join(mnt, ".bf16"))
            cfg = AutoConfig.from_pretrained(os.path.join(mnt, ".bf16"))
            m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
            m.load_state_dict(ref)
            with torch.no_grad():
                a = m(ids).logits
                ga = m.generate(ids, max_new_tokens=12, do_sample=False)[0].tolist()
            diff = (a.float() - b.float()).abs().max().item()
            say(diff == 0 and ga == gb and db == torch.bfloat16,
                f"transformers {name}: from_pretrained(MOUNT/.bf16) {db}, logits max diff {diff} against the model of the reference weights, tokens equal {ga == gb}")
        except Exception as e:
            say(False, f"block FP8 {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        # transformers' own reading of the original, which on a CPU dequantizes to bf16
        try:
            a, ga, ta, da = logits(orig)
            b, gb, tb, db = logits(os.path.join(mnt, ".bf16"))
            diff = (a.float() - b.float()).abs().max().item()
            print(f"info transformers {name}: from_pretrained(original FP8) on this CPU dequantizes to {da}; against MOUNT/.bf16: logits max diff {diff}, tokens equal {ga == gb}", flush=True)
        except Exception as e:
            msg = [l for l in str(e).splitlines() if l.strip()][:1]
            print(f"info transformers {name}: from_pretrained(original FP8) fails on this CPU ({type(e).__name__}: {msg[0] if msg else ''}); MOUNT/.bf16 loads", flush=True)


def logits(path, **kw):
    import torch
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    m = AutoModelForCausalLM.from_pretrained(path, **kw)
    load = time.perf_counter() - t0
    ids = torch.tensor([[1, 5, 9, 17, 33, 40, 41, 7]])
    with torch.no_grad():
        out = m(ids).logits
        gen = m.generate(ids, max_new_tokens=12, do_sample=False)
    return out, gen[0].tolist(), load, m.dtype


def check(work):
    check_fp8(work)
    for name in ("plain", "sharded"):
        for fn in (check_transformers, check_bf16, check_safetensors, check_numpy):
            try:
                fn(work, name)
            except Exception as e:  # a client failing on the mount is a FAIL line; the next check still runs
                say(False, f"{fn.__name__} {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    sys.exit(1 if failed else 0)


def paths(work, name):
    return os.path.join(work, name), os.path.join(work, "m_" + name)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def load_time(path):
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    AutoModelForCausalLM.from_pretrained(path)
    return time.perf_counter() - t0


def check_transformers(work, name):
    orig, mnt = paths(work, name)
    a, ga, ta, da = logits(orig)
    b, gb, tb, db = logits(mnt)
    diff = (a - b).abs().max().item()
    say(diff == 0 and ga == gb and da == db,
        f"transformers {name}: from_pretrained(MOUNT) logits max diff {diff}, greedy tokens equal {ga == gb}, dtype {db}")
    # from_pretrained's time, cold (page cache dropped) and warm, 3 rounds
    # alternating direct and mount
    times = {"direct cold": [], "mount cold": [], "direct warm": [], "mount warm": []}
    for _ in range(3):
        for label, p in (("direct", orig), ("mount", mnt)):
            drop_caches()
            times[label + " cold"].append(load_time(p))
            times[label + " warm"].append(load_time(p))
    print(f"time transformers {name} from_pretrained: " + "; ".join(
        f"{k} {sorted(v)[1]:.3f} s (" + ", ".join(f"{x:.3f}" for x in v) + ")" for k, v in times.items()), flush=True)


def check_bf16(work, name):
    import torch

    orig, mnt = paths(work, name)
    # the .bf16 view: its config.json says bfloat16, so the default load is bf16
    a, ga, ta, da = logits(orig, dtype=torch.bfloat16)
    b, gb, tb, db = logits(os.path.join(mnt, ".bf16"))
    diff = (a.float() - b.float()).abs().max().item()
    say(db == torch.bfloat16 and diff == 0 and ga == gb,
        f"transformers {name}: from_pretrained(MOUNT/.bf16) default dtype {db}, logits max diff {diff} against the original loaded as bfloat16, tokens equal {ga == gb}")


def originals(orig):
    from safetensors.numpy import load_file

    want = {}
    for f in sorted(os.listdir(orig)):
        if f.endswith(".safetensors"):
            want.update(load_file(os.path.join(orig, f)))
    return want


def check_safetensors(work, name):
    import numpy as np
    from safetensors import safe_open

    orig, mnt = paths(work, name)
    want, got = originals(orig), {}
    with safe_open(os.path.join(mnt, ".safetensors", "model.safetensors"), "np") as f:
        for k in f.keys():
            got[k] = f.get_tensor(k)
    say(set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want),
        f"safetensors {name}: safe_open(MOUNT/.safetensors/model.safetensors): {len(got)} tensors equal to load_file of the original")


def check_numpy(work, name):
    import numpy as np

    orig, mnt = paths(work, name)
    want, ok = originals(orig), True
    for k, v in want.items():
        arr = np.load(os.path.join(mnt, ".npy", k + ".npy"), mmap_mode="r")
        ok = ok and arr.dtype == v.dtype and np.array_equal(arr, v)
    say(ok, f"numpy {name}: np.load(MOUNT/.npy/NAME.npy, mmap_mode='r') equal for {len(want)} tensors")


def onnx_check(model, orig_dir, mnt_dir):
    import numpy as np
    import onnxruntime as ort

    outs = []
    for d in (orig_dir, mnt_dir):
        s = ort.InferenceSession(os.path.join(d, model), providers=["CPUExecutionProvider"])
        feeds = {}
        for i in s.get_inputs():
            shape = [x if isinstance(x, int) else 1 for x in i.shape]
            feeds[i.name] = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
        outs.append(s.run(None, feeds))
    same = all(np.array_equal(a, b) for a, b in zip(*outs))
    say(same, f"onnxruntime {model}: outputs through the mount bit-equal to the original's ({len(outs[0])} outputs)")
    sys.exit(1 if failed else 0)


def h5_check(orig, mounted):
    import h5py
    import numpy as np

    def walk(f):
        out = {}
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
        return out

    with h5py.File(orig, "r") as a, h5py.File(mounted, "r") as b:
        wa, wb = walk(a), walk(b)
    same = set(wa) == set(wb) and all(np.array_equal(wa[k], wb[k]) for k in wa)
    say(same, f"h5py {os.path.basename(orig)}: {len(wa)} datasets through the mount equal to the original's")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2])
    elif cmd == "check":
        check(sys.argv[2])
    elif cmd in ("onnx", "h5"):
        try:
            onnx_check(*sys.argv[2:5]) if cmd == "onnx" else h5_check(*sys.argv[2:4])
        except Exception as e:
            say(False, f"{cmd} {' '.join(sys.argv[2:])}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            sys.exit(1)
    else:
        sys.exit("usage: real_clients.py make|check|onnx|h5 ...")
