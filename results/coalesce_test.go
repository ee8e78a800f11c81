package results

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// A batch whose metadata length passes the int32 an Arrow message gives it (2 GiB; a
// file may have 8) is refused as arrow-go's reader refuses it, as the reader did before
// it coalesced batches; the coalescer took it, and read its row as a good one. The file:
// a rank file of three one-row batches whose second one's metadata is followed by 2 GiB
// of zeros (its flatbuffer, whose offsets are relative, still verifies), with the end
// marker: damaged. The zeros are never written, so the pages are not touched.
func TestBatchOfMetadataPast2GiBIsRefused(t *testing.T) {
	data, _, starts := writeRowsFile(t, 3, 0, true, 31)
	at := starts[2] // the second row's batch
	metaLen := int(binary.LittleEndian.Uint32(data[at+4:]))
	const pad = 1 << 31 // a multiple of 8: the messages stay aligned
	if metaLen+pad <= math.MaxInt32 || metaLen+pad > math.MaxUint32 {
		t.Fatalf("metadata of %d bytes", metaLen+pad)
	}
	big := make([]byte, len(data)+pad)
	copy(big, data[:at+8+metaLen])
	binary.LittleEndian.PutUint32(big[at+4:], uint32(metaLen+pad))
	copy(big[at+8+metaLen+pad:], data[at+8+metaLen:])
	for _, coalesce := range []bool{false, true} {
		coalesceBatches = coalesce
		rows, _, err := decodeRows(big)
		coalesceBatches = true
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("coalescing %v: %d rows, err %v; want the file refused as damaged", coalesce, len(rows), err)
		}
	}
}
