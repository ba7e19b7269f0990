package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func pkRun(b []byte) (any, error) {
	return NewMachine(bytes.NewReader(b), int64(len(b)), PlainEnv{}).Run()
}

func pkLen8(op byte, s string) string {
	return string(binary.LittleEndian.AppendUint64([]byte{op}, uint64(len(s)))) + s
}

// errContains checks that err is one *Error whose "MSG (at byte N)"
// contains each of wants.
func errContains(t testing.TB, err error, wants ...string) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v is not a *Error", err, err)
	}
	msg := fmt.Sprintf("%s (at byte %d)", pe.Msg, pe.Off)
	if strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error has a line break: %q", msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Fatalf("error %q does not contain %q", msg, w)
		}
	}
}

// TestPickleOpcodes runs one small pickle per opcode (protocols 0-5,
// Python 2 forms) and compares the Python-like repr of the result.
func TestPickleOpcodes(t *testing.T) {
	np025 := "\x80\x02cnumpy.core.multiarray\nscalar\nq\x00cnumpy\ndtype\nq\x01X\x02\x00\x00\x00f8q\x02\x89\x88\x87q\x03Rq\x04(K\x03X\x01\x00\x00\x00<q\x05NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tq\x06bc_codecs\nencode\nq\x07X\t\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc3\x90?q\x08X\x06\x00\x00\x00latin1q\t\x86q\nRq\x0b\x86q\x0cRq\r."
	for _, c := range []struct{ name, pkl, want string }{
		{"INT true", "I01\n.", "True"},
		{"INT false", "I00\n.", "False"},
		{"INT", "I42\n.", "42"},
		{"INT negative", "I-7\n.", "-7"},
		{"INT big", "I123456789012345678901234567890\n.", "123456789012345678901234567890"},
		{"LONG", "L5L\n.", "5"},
		{"LONG big negative", "L-99999999999999999999999L\n.", "-99999999999999999999999"},
		{"FLOAT", "F1.5\n.", "1.5"},
		{"FLOAT nan", "Fnan\n.", "nan"},
		{"FLOAT -inf", "F-inf\n.", "-inf"},
		{"STRING escapes", "S'ab\\'c\\x41\\n\\101'\n.", `"ab'cA\nA"`},
		{"STRING double quotes", "S\"q\"\n.", `"q"`},
		{"UNICODE raw escape", "Vh\\u00e9llo \\U0001F600\n.", `"héllo 😀"`},
		{"NONE", "N.", "None"},
		{"TUPLE", "(I1\nI2\nt.", "(1, 2)"},
		{"LIST APPEND PUT", "(lp0\nI1\naI2\na.", "[1, 2]"},
		{"DICT SETITEM", "(dp0\nS'a'\np1\nI1\ns.", `{"a": 1}`},
		{"DICT", "(K\x01K\x02d.", "{1: 2}"},
		{"LIST", "(K\x01K\x02l.", "[1, 2]"},
		{"POP", "I1\nI2\n0.", "1"},
		{"POP to mark", "I1\n(0.", "1"},
		{"POP_MARK", "I1\n(I2\nI3\n1.", "1"},
		{"DUP", "(I1\n2t.", "(1, 1)"},
		{"PUT GET", "I5\np3\n0g3\n.", "5"},
		{"BINPUT BINGET", "K\x05q\x07\x30h\x07.", "5"},
		{"LONG_BINPUT LONG_BINGET", "K\x05r\x00\x01\x00\x00\x30j\x00\x01\x00\x00.", "5"},
		{"MEMOIZE", "K\x07\x94\x30h\x00.", "7"},
		{"BININT1", "K\x05.", "5"},
		{"BININT2", "M\x00\x01.", "256"},
		{"BININT", "J\xff\xff\xff\xff.", "-1"},
		{"LONG1", "\x8a\x01\xff.", "-1"},
		{"LONG1 empty", "\x8a\x00.", "0"},
		{"LONG1 big", "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", "18446744073709551616"},
		{"LONG4", "\x8b\x02\x00\x00\x00\x00\x01.", "256"},
		{"BINFLOAT", "G?\xf8\x00\x00\x00\x00\x00\x00.", "1.5"},
		{"SHORT_BINSTRING", "U\x02hi.", `"hi"`},
		{"SHORT_BINSTRING latin1", "U\x02h\xe9.", `"hé"`},
		{"BINSTRING", "T\x02\x00\x00\x00hi.", `"hi"`},
		{"BINUNICODE", "X\x02\x00\x00\x00hi.", `"hi"`},
		{"SHORT_BINUNICODE", "\x8c\x02hi.", `"hi"`},
		{"BINUNICODE8", pkLen8(0x8d, "hi") + ".", `"hi"`},
		{"BINBYTES", "B\x02\x00\x00\x00hi.", `b"hi"`},
		{"SHORT_BINBYTES", "C\x02hi.", `b"hi"`},
		{"BINBYTES8", pkLen8(0x8e, "hi") + ".", `b"hi"`},
		{"BYTEARRAY8", "\x80\x05\x95\r\x00\x00\x00\x00\x00\x00\x00\x96\x02\x00\x00\x00\x00\x00\x00\x00xy\x94.", `b"xy"`},
		{"EMPTY_TUPLE", ").", "()"},
		{"TUPLE1", "K\x01\x85.", "(1,)"},
		{"TUPLE2", "K\x01K\x02\x86.", "(1, 2)"},
		{"TUPLE3", "K\x01K\x02K\x03\x87.", "(1, 2, 3)"},
		{"EMPTY_LIST APPENDS", "](K\x01K\x02e.", "[1, 2]"},
		{"APPEND", "]K\x01a.", "[1]"},
		{"EMPTY_DICT SETITEMS", "}(K\x01K\x02K\x03K\x04u.", "{1: 2, 3: 4}"},
		{"SETITEM repeated key kept", "}K\x01K\x02sK\x01K\x03s.", "{1: 2, 1: 3}"},
		{"EMPTY_SET ADDITEMS", "\x8f(K\x01K\x02\x90.", "{1, 2}"},
		{"FROZENSET", "(K\x01\x91.", "{1}"},
		{"NEWTRUE", "\x88.", "True"},
		{"NEWFALSE", "\x89.", "False"},
		{"PROTO FRAME", "\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x07.", "7"},
		{"GLOBAL REDUCE OrderedDict", "\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00aq\x02K\x01s.", `{"a": 1}`},
		{"STACK_GLOBAL", "\x8c\x0bcollections\x8c\x0bOrderedDict\x93)R.", "{}"},
		{"NEWOBJ", "c__main__\nFoo\n)\x81}(X\x01\x00\x00\x00aK\x01ub.", "__main__.Foo()"},
		{"NEWOBJ_EX", "c__main__\nFoo\n(K\x01t}\x92.", "__main__.Foo(1,)"},
		{"OBJ", "(c__main__\nFoo\nK\x01o.", "__main__.Foo(1,)"},
		{"INST", "(K\x01i__main__\nFoo\n.", "__main__.Foo(1,)"},
		{"BUILD on dict", "}}(K\x01K\x02ub.", "{}"},
		{"PERSID plain", "Pkey\n.", `persistent id "key"`},
		{"BINPERSID plain", "K\x01Q.", "persistent id 1"},
		{"py2 set", "\x80\x02c__builtin__\nset\nq\x00]q\x01(K\x01K\x02e\x85q\x02Rq\x03.", "{1, 2}"},
		{"py2 frozenset", "\x80\x02c__builtin__\nfrozenset\nq\x00]q\x01K\x03a\x85q\x02Rq\x03.", "{3}"},
		{"complex", "\x80\x02c__builtin__\ncomplex\nq\x00G?\xf0\x00\x00\x00\x00\x00\x00G@\x00\x00\x00\x00\x00\x00\x00\x86q\x01Rq\x02.", "(1.0+2j)"},
		{"py3 bytes via _codecs", "\x80\x02c_codecs\nencode\nq\x00X\x03\x00\x00\x00\xc3\xa9aq\x01X\x06\x00\x00\x00latin1q\x02\x86q\x03Rq\x04.", `b"\xe9a"`},
		{"numpy float64 scalar", np025, "0.25"},
		{"numpy scalar protocol 4", "\x80\x04\x95i\x00\x00\x00\x00\x00\x00\x00\x8c\x15numpy.core.multiarray\x94\x8c\x06scalar\x94\x93\x94\x8c\x05numpy\x94\x8c\x05dtype\x94\x93\x94\x8c\x02f8\x94\x89\x88\x87\x94R\x94(K\x03\x8c\x01<\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t\x94bC\x08\x00\x00\x00\x00\x00\x00\xd0?\x94\x86\x94R\x94.", "0.25"},
		{"numpy int64 scalar", strings.Replace(strings.Replace(np025, "f8", "i8", 1), "X\t\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc3\x90?", "X\x10\x00\x00\x00\xc3\xbd\xc3\xbf\xc3\xbf\xc3\xbf\xc3\xbf\xc3\xbf\xc3\xbf\xc3\xbf", 1), "-3"},
		{"unknown class is opaque", "cargparse\nNamespace\n)R}(X\x02\x00\x00\x00lrG?\xb9\x99\x99\x99\x99\x99\x9aub.", "argparse.Namespace()"},
		{"recursive list", "]q\x00h\x00a.", "[[[[[[[[[[[[[[[[[..."},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := pkRun([]byte(c.pkl))
			if err != nil {
				t.Fatal(err)
			}
			got := Repr(v, 200)
			if strings.HasSuffix(c.want, "...") {
				if !strings.HasPrefix(got, strings.TrimSuffix(c.want, "...")) {
					t.Fatalf("got %s, want %s", got, c.want)
				}
				return
			}
			if got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// TestPickleRefusesGlobals: dangerous globals refuse the file at the byte
// they are named, whichever opcode names them; nothing is resolved.
func TestPickleRefusesGlobals(t *testing.T) {
	for _, c := range []struct{ pkl, want string }{
		{"cposix\nsystem\n.", "refused global posix.system (at byte 0)"},
		{"K\x01cos\nsystem\n.", "refused global os.system (at byte 2)"},
		{"cnt\nsystem\n.", "refused global nt.system"},
		{"csubprocess\nPopen\n.", "refused global subprocess.Popen"},
		{"c__builtin__\neval\n.", "refused global __builtin__.eval: a builtin"},
		{"cbuiltins\nexec\n.", "refused global builtins.exec"},
		{"cbuiltins\ngetattr\n.", "refused global builtins.getattr"},
		{"cbuiltins\n__import__\n.", "refused global builtins.__import__"},
		{"c__builtin__\napply\n.", "refused global __builtin__.apply"},
		{"cbuiltins\nopen\n.", "refused global builtins.open"},
		{"csys\nmodules\n.", "refused global sys.modules"},
		{"cshutil\nrmtree\n.", "refused global shutil.rmtree"},
		{"cimportlib.machinery\nSourceFileLoader\n.", "refused global importlib.machinery.SourceFileLoader"},
		{"ccopyreg\n_reconstructor\n.", "refused global copyreg._reconstructor"},
		{"ccopy_reg\n_reconstructor\n.", "refused global copy_reg._reconstructor"},
		{"c_pickle\nloads\n.", "refused global _pickle.loads"},
		{"cwebbrowser\nopen\n.", "refused global webbrowser.open"},
		{"csocket\nsocket\n.", "refused global socket.socket"},
		{"cpty\nspawn\n.", "refused global pty.spawn"},
		{"crunpy\nrun_path\n.", "refused global runpy.run_path"},
		{"ccode\nInteractiveInterpreter\n.", "refused global code.InteractiveInterpreter"},
		{"ctorch\nload\n.", "refused global torch.load"},
		{"cpathlib\nPath.write_text\n.", "refused global pathlib.Path.write_text"},
		{"ctypes\nFunctionType\n.", "refused global types.FunctionType"},
		{"cfunctools\npartial\n.", "refused global functools.partial"},
		{"ccollections\nOrderedDict.__init__.__globals__\n.", "refused global collections.OrderedDict.__init__.__globals__: it reaches a dunder"},
		{"\x8c\x05posix\x8c\x06system\x93.", "refused global posix.system (at byte 15)"},
		{"(ios\nsystem\n.", "refused global os.system (at byte 1)"},
		{"\x80\x02}(X\x01\x00\x00\x00ecposix\nsystem\nX\x02\x00\x00\x00id\x85Ru.", "refused global posix.system (at byte 10)"},
	} {
		_, err := pkRun([]byte(c.pkl))
		errContains(t, err, c.want)
	}
	// Harmless globals resolve to opaque values.
	for _, ok := range []string{"ctorch._utils\n_rebuild_tensor_v2\n.", "cargparse\nNamespace\n.", "c__torch__\nFoo\n.", "cnumpy\ndtype\n.", "c__builtin__\nset\n.",
		"cpathlib\nPosixPath\n.", "ctypes\nSimpleNamespace\n."} {
		if _, err := pkRun([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestPickleHostile: malformed pickles give one-line errors at a byte
// offset, never a panic or a large allocation.
func TestPickleHostile(t *testing.T) {
	for _, c := range []struct{ name, pkl, want string }{
		{"empty", "", "pickle is truncated (at byte 0)"},
		{"no STOP", "K\x01", "pickle is truncated (at byte 2)"},
		{"truncated arg", "K", "truncated"},
		{"huge BINUNICODE", "X\xff\xff\xff\x7f", "pickle string of 2147483647 bytes runs past the end of the data (0 bytes left)"},
		{"huge BINBYTES8", "\x8e\xff\xff\xff\xff\xff\xff\xff\xff", "runs past the end of the data"},
		{"negative BINSTRING", "T\xff\xff\xff\xff", "negative length"},
		{"huge LONG4", "\x8b\xff\xff\xff\x7f", "pickle integer of 2147483647 bytes"},
		{"STOP on empty stack", ".", "STOP with an empty stack"},
		{"POP on empty", "0.", "no MARK to pop to"},
		{"TUPLE without mark", "K\x01t.", "no MARK"},
		{"TUPLE2 underflow", "K\x01\x86.", "stack underflow"},
		{"pop across mark", "K\x01(R.", "stack underflow"},
		{"deep marks", strings.Repeat("(", MaxNesting+1), "nests MARKs deeper than"},
		{"missing memo", "g5\n.", "memo has no entry 5"},
		{"bad memo index", "gx\n.", "memo index"},
		{"EXT1", "\x82\x01.", "refused pickle opcode EXT1"},
		{"EXT2", "\x83\x01\x00.", "refused pickle opcode EXT2"},
		{"EXT4", "\x84\x01\x00\x00\x00.", "refused pickle opcode EXT4"},
		{"NEXT_BUFFER", "\x97.", "out-of-band buffer"},
		{"READONLY_BUFFER", "\x98.", "out-of-band buffer"},
		{"protocol 6", "\x80\x06.", "pickle protocol 6 is newer than 5"},
		{"unknown opcode", "\xff.", "unknown pickle opcode 0xff (at byte 0)"},
		{"APPEND to int", "K\x01K\x02a.", "APPEND to a int"},
		{"SETITEM on int", "K\x01K\x02K\x03s.", "SETITEM on a int"},
		{"SETITEMS odd", "}(K\x01u.", "odd number"},
		{"DICT odd", "(K\x01d.", "odd number"},
		{"ADDITEMS on list", "](K\x01\x90.", "ADDITEMS on a list"},
		{"REDUCE args not tuple", "cargparse\nNamespace\nK\x01R.", "REDUCE wants an argument tuple, got int"},
		{"NEWOBJ args not tuple", "cargparse\nNamespace\nK\x01\x81.", "NEWOBJ wants an argument tuple"},
		{"OBJ without class", "(o.", "OBJ without a class"},
		{"STACK_GLOBAL non-strings", "K\x01K\x02\x93.", "STACK_GLOBAL wants two strings"},
		{"bad INT", "I12x\n.", `pickle integer "12x" is not a decimal number`},
		{"INT of 4,301 digits", "I" + strings.Repeat("9", 4301) + "\n.", "pickle integer of 4301 digits (at most 4300"},
		{"bad FLOAT", "Fabc\n.", "FLOAT"},
		{"unquoted STRING", "Sabc\n.", "not a quoted string"},
		{"bad escape STRING", "S'a\\x4'\n.", "not a quoted string"},
		{"long line", "I" + strings.Repeat("1", MaxLine+1) + "\n.", "longer than"},
		{"empty GLOBAL", "c\n\n.", "refused global .: malformed name"},
		{"stack cap", strings.Repeat("N", MaxStack+1), "stack holds more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pkRun([]byte(c.pkl))
			errContains(t, err, c.want)
		})
	}
}

// TestLargeValues: a str/bytes value past MaxValue is skipped, not kept.
func TestLargeValues(t *testing.T) {
	n := MaxValue + 1
	p := append(binary.LittleEndian.AppendUint64([]byte{OpBINBYTES8}, uint64(n)), make([]byte, n)...)
	v, err := pkRun(append(p, '.'))
	if err != nil {
		t.Fatal(err)
	}
	if got := Repr(v, 100); got != "<16777217-byte bytes>" {
		t.Fatalf("got %s", got)
	}
	p = append(binary.LittleEndian.AppendUint32([]byte{'X'}, uint32(n)), make([]byte, n-1)...)
	_, err = pkRun(p)
	errContains(t, err, "pickle string of 16777217 bytes runs past the end of the data (16777216 bytes left)")
}
