package pickle

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestBudget: each budget is its floor plus a multiple of the size, and
// its error names the limit.
func TestBudget(t *testing.T) {
	for _, c := range []struct {
		name   string
		charge func(b *Budget, n int64) error
		max    func(int64) int64
		limit  string
	}{
		{"results", (*Budget).Results, MaxResults, "pickle.MaxResults"},
		{"name bytes", (*Budget).NameBytes, MaxNameBytes, "pickle.MaxNameBytes"},
		{"metadata bytes", (*Budget).MetaBytes, MaxMetaBytes, "pickle.MaxMetaBytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBudget(1000)
			if err := c.charge(b, c.max(1000)); err != nil {
				t.Fatalf("the whole budget: %v", err)
			}
			err := c.charge(b, 1)
			if err == nil || !strings.Contains(err.Error(), c.limit) || !strings.Contains(err.Error(), "1000-byte pickle") {
				t.Fatalf("one past the budget: %v", err)
			}
		})
	}
	if MaxResults(-1) != ResultsFloor || MaxWork(1<<62) <= 0 || MaxNameBytes(1<<62) <= 0 {
		t.Fatal("budgets do not saturate")
	}
}

// TestMachineCopyBudget: list(x) of one large shared list, many times,
// is refused past MaxWork instead of copying quadratically; a single
// copy is fine.
func TestMachineCopyBudget(t *testing.T) {
	list := func(items, copies int) []byte {
		var b bytes.Buffer
		b.WriteString("cbuiltins\nlist\nq\x01]q\x00(")
		b.Write(bytes.Repeat([]byte{'N'}, items))
		b.WriteString("e0")
		b.Write(bytes.Repeat([]byte("h\x01h\x00\x85R0"), copies))
		b.WriteString("N.")
		return b.Bytes()
	}
	if _, err := pkRun(list(1000, 1)); err != nil {
		t.Fatal(err)
	}
	_, err := pkRun(list(10_000, 10_000))
	errContains(t, err, "pickle copies more values than its size allows (limit pickle.MaxWork: ")
	// Copies through tuple(), set() and frozenset() are charged too.
	for _, fn := range []string{"tuple", "set", "frozenset"} {
		p := strings.Replace(string(list(10_000, 10_000)), "cbuiltins\nlist\n", "cbuiltins\n"+fn+"\n", 1)
		_, err := pkRun([]byte(p))
		errContains(t, err, "pickle.MaxWork")
	}
}

// TestBuildKeepsState: BUILD never merges or drops: repeated states of an
// object and of a dict subclass are all kept; state for a value that
// holds none refuses the pickle.
func TestBuildKeepsState(t *testing.T) {
	v, err := pkRun([]byte("c__main__\nFoo\n)R}(X\x01\x00\x00\x00aK\x01ub}(X\x01\x00\x00\x00aK\x02ub."))
	if err != nil {
		t.Fatal(err)
	}
	if o := v.(*Object); len(o.State) != 2 {
		t.Fatalf("states %v", o.State)
	}
	v, err = pkRun([]byte("ccollections\nOrderedDict\n)RK\x01bK\x02b."))
	if err != nil {
		t.Fatal(err)
	}
	if d := v.(*Dict); len(d.Attrs) != 2 {
		t.Fatalf("attrs %v", d.Attrs)
	}
	for _, ok := range []string{"]Nb.", "]}b.", "])b.", "]I0\nb."} {
		if _, err := pkRun([]byte(ok)); err != nil {
			t.Errorf("%q: empty state refused: %v", ok, err)
		}
	}
	_, err = pkRun([]byte("](K\x01K\x02eK\x01b."))
	errContains(t, err, "pickle BUILD gives state 1 to a list, which holds none (at byte 9)")
}

// TestNotCallable: REDUCE and NEWOBJ of plain data fail, as in Python.
func TestNotCallable(t *testing.T) {
	for _, c := range []struct{ pkl, want string }{
		{"}(K\x01K\x02u)R.", "pickle calls a dict, which is not callable (at byte 8)"},
		{"(K\x01t)R.", "pickle calls a tuple, which is not callable"},
		{"X\x01\x00\x00\x00a)\x81.", "pickle NEWOBJ of a str, which is not a class"},
	} {
		_, err := pkRun([]byte(c.pkl))
		errContains(t, err, c.want)
	}
}

// FuzzMachine runs any bytes through the plain machine: an *Error or a
// value, never a panic.
func FuzzMachine(f *testing.F) {
	f.Add([]byte("\x80\x02}(X\x01\x00\x00\x00aK\x01u."))
	f.Add([]byte("(lp0\nI1\naS'x'\np1\na(dp2\nV\\u00e9\np3\nF1.5\nsa."))
	f.Add([]byte("cbuiltins\nlist\nq\x01]q\x00(NNNNe0h\x01h\x00\x85R0N."))
	f.Add([]byte("N" + strings.Repeat("2\x86", 30) + "."))
	f.Add([]byte("c__main__\nFoo\n)R}(X\x01\x00\x00\x00aK\x01ub}(X\x01\x00\x00\x00aK\x02ub."))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := pkRun(b)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Off < 0 || pe.Off > int64(len(b)) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		Repr(v, 200)
	})
}
