package index

import (
	"strings"
	"testing"
)

// TestAssignPathsTwins: a part and the logical tensor of its name share
// one path; any other two tensors of one name (two stored, two parts, a
// stored tensor and a logical one, three of a name) still clash.
func TestAssignPathsTwins(t *testing.T) {
	for _, tc := range []struct {
		roles []Role
		ok    bool
	}{
		{[]Role{RolePart, RoleLogical}, true},
		{[]Role{RoleLogical, RolePart}, true},
		{[]Role{RoleStored, RoleStored}, false},
		{[]Role{RolePart, RolePart}, false},
		{[]Role{RoleStored, RoleLogical}, false},
		{[]Role{RoleLogical, RoleLogical}, false},
		{[]Role{RolePart, RoleLogical, RoleLogical}, false},
	} {
		idx := &Index{Tensors: []Tensor{{Name: "a.weight"}, {Name: "b"}}}
		for _, r := range tc.roles {
			idx.Tensors = append(idx.Tensors, Tensor{Name: "x.weight", Role: r})
		}
		err := AssignPaths(idx)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.roles, err)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "same path") {
			t.Errorf("%v: %v", tc.roles, err)
		}
		if err == nil && (idx.Tensors[2].Path != "x.weight" || idx.Tensors[3].Path != "x.weight") {
			t.Errorf("%v: paths %q %q", tc.roles, idx.Tensors[2].Path, idx.Tensors[3].Path)
		}
	}
}
