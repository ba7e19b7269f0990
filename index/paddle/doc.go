// Package paddle reads PaddlePaddle checkpoints (.pdparams, .pdopt):
// what paddle.save writes, a bare pickle (protocol 2 to 4) of a dict of
// numpy arrays, nested dicts, lists and tuples. One row of the format
// table in package formats.
//
// It exports Sniff and Parse. The pickle is read by the restricted
// unpickler of index/pickle and walked by torch.ParsePickle (the same
// walk as numpy arrays inside a torch pickle): nothing is imported or
// executed.
//
// Decisions:
//   - Detected by content: a pickle of protocol 2 to 4 whose value
//     starts as a dict. Parse refuses, as not a checkpoint at all
//     (ErrNotPaddle), such a pickle that holds no numpy array (a dict of
//     ints); a torch legacy file starts with its magic number instead and
//     is never sniffed as Paddle.
//   - The shapes paddle.save gives tensors are pattern-matched, never
//     called: (builtins.eval, ('data', {'data': array})) for a LoDTensor
//     (eval is claimed from pickle.CheckGlobal only for exactly that form;
//     any other use refuses the file) and (builtins.tuple, ((name,
//     array),)) for a Tensor or parameter, which paddle.load gives back
//     as the array: the tensor is named by its keys, as every array is.
//   - A parameter that paddle.save split into NAME@@.0, NAME@@.1 ...
//     (protocols 2 and 3, over 2^30 bytes: the slices listed under
//     "UnpackBigParamInfor@@") is one tensor NAME of its OriginShape,
//     as paddle.load joins it: one range where the slices are adjacent,
//     else an Index member of kind index.Tiles (index.ConcatTiles) over the slices'
//     ranges. "UnpackBigParamInfor@@" leaves the metadata as it leaves
//     paddle.load's dict; "StructuredToParameterName@@" stays.
//   - Problems are *index.FormatError. Fuzz target: FuzzPaddle.
package paddle
