// Package pickle is a restricted unpickler: it reads Python pickles
// (protocols 0 to 5, Python 2 forms included) into Go values that
// describe what Python would have built, and never imports, calls or
// executes anything. It knows nothing of tensors: the PyTorch reader in
// package index/torch is a client that passes an Env of its own.
//
// # Values
//
// Python None is nil, bool is bool, int is int64 or *big.Int, float is
// float64, str is string; tuples, lists, sets, dicts, bytes, complex
// numbers, classes (*Global) and opaque instances (*Object) have types of
// their own (values.go). Repr renders any of them as a bounded,
// Python-like repr.
//
// # Environment
//
// GLOBAL, STACK_GLOBAL and INST name a class or function: CheckGlobal
// refuses, at the byte it appears at, any name a data file has no reason
// to hold (os.system, builtins.eval, subprocess, anything reaching a
// dunder attribute...; globals.go). What remains goes to the Env, with
// every call (REDUCE, OBJ, INST), __new__ (NEWOBJ), BUILD and persistent
// id. PlainEnv interprets plain data (containers, collections' dicts,
// complex, bytes, numpy scalars) and turns anything else into an opaque
// *Object whose arguments and state are kept for the client to walk.
// numpy arrays (_reconstruct of numpy.core or numpy._core.multiarray)
// are an *NDArray holding their BUILD state; Machine.SpanOf says where the
// bytes of a str or bytes value (the array's data) lie in the stream, and
// whether they are its raw bytes, so that a client can serve them in
// place. Opcodes that need Python-side machinery (EXT1/2/4, protocol 5's
// out-of-band buffers) are refused.
//
// # Invariants
//
//   - Nothing is dropped. A Dict keeps every pair the pickle sets, in
//     order, even a repeated key (Python would keep only the last, and a
//     dict keyed by objects is keyed by identity there); an Object keeps
//     every BUILD state; BUILD on a value that holds no state refuses the
//     pickle rather than lose the state. Naming the entries (and telling
//     apart keys that print the same) is the client's rule.
//   - Memory follows the stream. Every length read from the stream is
//     checked against the bytes it really has left before anything is
//     allocated; the stack, MARK nesting, text lines and integers have
//     named caps; str and bytes longer than MaxValue are skipped and stand
//     as a Large; the memo holds at most MaxMemo entries (half an entry a
//     byte, 16 bytes each when its keys are dense); copies an Env makes
//     of containers it was handed are charged against MaxWork (budget.go).
//     Shared references are shared Go pointers, never copied. A stream
//     that is smaller in its file than it is (a deflated data.pkl) gets
//     the budgets of its bytes in the file (Machine.SetCost).
//   - Clients budget their own results: a value reached by k paths costs
//     k, and k can be exponential in the stream's size. Budget counts
//     results, tensors, bytes of names and bytes of metadata against limits that
//     are a floor plus a multiple of the pickle's size, and its error
//     names the limit crossed.
//
// # Errors
//
// Problems are *Error values carrying the stream offset; the client
// turns them into its own errors (file name, where the stream lies in
// the file). A read error of the underlying reader is wrapped (Unwrap).
// The machine never panics on any input (FuzzMachine).
package pickle
