// Package torch reads the structure of PyTorch checkpoints: torch.save
// zip archives (and TorchScript archives, through their data.pkl) and
// legacy pre-1.6 files. One row of the format table in package formats;
// the decisions are described at the top of torch.go.
//
// It exports Sniff, Parse and ParseZip (a torch.save zip, which the npz
// parser's caller hands over). The pickles are read by the restricted
// unpickler of index/pickle (pickle.go here places its errors in the
// file); torch_tree.go walks the unpickled value into tensors and
// metadata, torch_numpy.go reads numpy arrays inside the pickle (with
// numpy.DType).
//
// # Invariants
//
//   - Nothing is imported or executed: a pickle naming a global that
//     pickle.CheckGlobal refuses (os.system ...) is refused with one line.
//   - Parse reads one index.File and returns an Index with Sources ==
//     []string{f.Name()} (then one source per member described in
//     Index.Members: deflated data.pkl, Latin-1 strings) and no paths.
//   - Walks are bounded (index.MaxNesting, index.MaxTensors and the
//     pickle budgets), so a malformed or hostile file costs time and
//     memory in proportion to its size.
//   - Problems are *index.FormatError. Fuzz targets: FuzzTorchZip,
//     FuzzTorchLegacy, FuzzUnpickle.
package torch
