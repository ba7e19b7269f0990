package index

import (
	"slices"
	"testing"
)

// TestMemberShifted: Member.Shifted moves every source number a member
// holds, in each kind that holds any (Tiles' chunks, Decoded's and
// Dequantized's ranges) and nowhere else, and leaves the original as it
// was (formats' merge and the .keras loader renumbered Tiles and Decoded
// by hand, each only the kind it met).
func TestMemberShifted(t *testing.T) {
	parts := []Part{{Source: 1, Offset: 8, Size: 4}, {Source: 2, Offset: 0, Size: 4}}
	for _, k := range []MemberKind{
		&Deflated{Offset: 3}, &Zstd{Offset: 3}, &Latin1{Offset: 3},
		&Tiles{Shape: []int64{4}, ElemSize: 1, Chunks: []Chunk{{Source: 1, Start: []int64{0}, Shape: []int64{2}}, {Source: 2, Start: []int64{2}, Shape: []int64{2}}}},
		&Decoded{Read: parts}, &Dequantized{Parts: parts},
	} {
		m := Member{Source: 3, File: 1, Kind: k}
		before := m.Kind.Ranges(&m)
		s := m.Shifted(10)
		if s.Source != 13 || s.File != 11 {
			t.Errorf("%T: source %d, file %d", k, s.Source, s.File)
		}
		after := s.Kind.Ranges(&s)
		if len(after) != len(before) {
			t.Fatalf("%T: %d ranges, then %d", k, len(before), len(after))
		}
		for i := range after {
			if after[i].Source != before[i].Source+10 || after[i].Offset != before[i].Offset || after[i].Size != before[i].Size {
				t.Errorf("%T: range %d %+v, was %+v", k, i, after[i], before[i])
			}
		}
		if again := m.Kind.Ranges(&m); !slices.Equal(again, before) {
			t.Errorf("%T: the original's ranges changed: %+v, were %+v", k, again, before)
		}
	}
}
