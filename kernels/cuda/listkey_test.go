package cuda

import (
	"testing"

	"github.com/longca/longca/mask"
)

// The list cache's keys: equal content gives the same content key wherever it lives, any
// changed value or tile shape a different one; the identity key follows the slice array.
func TestListKeys(t *testing.T) {
	mk := func() mask.Mask {
		return mask.Mask{SeqQ: 1024, SeqK: 1024, Slices: []mask.Slice{
			{Q: mask.Range{Start: 0, End: 512}, K: mask.Range{Start: 0, End: 512}, Kind: mask.Causal},
			{Q: mask.Range{Start: 512, End: 1024}, K: mask.Range{Start: 512, End: 1024}, Kind: mask.Full},
		}}
	}
	a, b := mk(), mk()
	if listKey([]mask.Mask{a}, 128, 128, false) != listKey([]mask.Mask{b}, 128, 128, false) {
		t.Fatal("equal masks in different arrays have different content keys")
	}
	if listIdent([]mask.Mask{a}, 128, 128, false) == listIdent([]mask.Mask{b}, 128, 128, false) {
		t.Fatal("masks in different arrays share an identity key")
	}
	if listIdent([]mask.Mask{a}, 128, 128, false) != listIdent([]mask.Mask{a}, 128, 128, false) {
		t.Fatal("the same mask has two identity keys")
	}
	base := listKey([]mask.Mask{a}, 128, 128, false)
	for name, other := range map[string]uint64{
		"tile":       listKey([]mask.Mask{a}, 64, 128, false),
		"transposed": listKey([]mask.Mask{a}, 128, 128, true),
		"two masks":  listKey([]mask.Mask{a, a}, 128, 128, false),
	} {
		if other == base {
			t.Errorf("%s: same content key", name)
		}
	}
	for i := range 5 {
		c := mk()
		s := &c.Slices[1]
		switch i {
		case 0:
			s.Q.Start++
		case 1:
			s.Q.End--
		case 2:
			s.K.Start++
		case 3:
			s.K.End--
		case 4:
			s.Kind = mask.Causal
		}
		if listKey([]mask.Mask{c}, 128, 128, false) == base {
			t.Errorf("field %d changed, same content key", i)
		}
	}
}
