package index

import "testing"

// TestRoleListed is the rule the listings follow: the native listing
// shows stored tensors and parts, a converted one stored tensors that
// are not parts and logical ones.
func TestRoleListed(t *testing.T) {
	for _, c := range []struct {
		role              Role
		native, converted bool
	}{
		{RoleStored, true, true},
		{RolePart, true, false},
		{RoleLogical, false, true},
	} {
		tt := Tensor{Role: c.role}
		if got := tt.Listed(false); got != c.native {
			t.Errorf("%s: native listing %v, want %v", c.role, got, c.native)
		}
		if got := tt.Listed(true); got != c.converted {
			t.Errorf("%s: converted listing %v, want %v", c.role, got, c.converted)
		}
	}
}
