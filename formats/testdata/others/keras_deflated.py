# Writes bank_churn/model.keras: bank_churn/model.weights.h5 in a .keras zip written by
# Python's zipfile with ZIP_DEFLATED (metadata.json, config.json, model.weights.h5, as Keras 3
# orders them), and the tensors h5py reads from the zip member itself (for EXPECTED.json).
# In the sid chroot: python3 keras_deflated.py IN.h5 OUT.keras OUT.json
import zipfile, json, hashlib, h5py, numpy as np, sys
src, out, exp = sys.argv[1], sys.argv[2], sys.argv[3]
h5 = open(src, 'rb').read()
with zipfile.ZipFile(out, 'w', compression=zipfile.ZIP_DEFLATED) as zf:
    zf.writestr('metadata.json', json.dumps({"keras_version": "3.12.0", "date_saved": "2026-11-28@08:00:00"}))
    zf.writestr('config.json', json.dumps({"module": "keras", "class_name": "Sequential"}))
    zf.writestr('model.weights.h5', h5)
tensors = []
with zipfile.ZipFile(out) as zf:
    info = zf.getinfo('model.weights.h5')
    assert info.compress_type == zipfile.ZIP_DEFLATED
    with zf.open('model.weights.h5') as m, h5py.File(m, 'r') as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                a = obj[()]
                a = np.asarray(a)
                tensors.append({"name": name, "dtype": str(a.dtype), "shape": list(obj.shape), "sha256": hashlib.sha256(a.astype(a.dtype.newbyteorder('<')).tobytes()).hexdigest()})
        f.visititems(visit)
json.dump({"tensors": tensors, "h5py": h5py.__version__}, open(exp, 'w'), indent=1)
print(len(tensors), info.compress_size, info.file_size)
