package nccl

import "fmt"

// Exchange shares rank 0's NCCL id with every rank: rank 0 passes the id it made and
// gets it back; every other rank passes nil and gets rank 0's bytes. The spmd
// bootstrap (a TCP store) implements it; tests use a channel.
type Exchange func(id []byte) ([]byte, error)

// ShareID makes the unique id on rank 0 (with create, ncclGetUniqueId in practice) and
// hands it to every rank through exchange, checking what comes back.
func ShareID(rank int, exchange Exchange, create func() (UniqueID, error)) (UniqueID, error) {
	var id UniqueID
	if exchange == nil {
		return id, fmt.Errorf("nccl: rank %d has no id exchange: the bootstrap must share rank 0's NCCL id", rank)
	}
	var mine []byte
	if rank == 0 {
		made, err := create()
		if err != nil {
			return id, err
		}
		mine = made[:]
	}
	got, err := exchange(mine)
	if err != nil {
		return id, fmt.Errorf("nccl: rank %d: sharing the NCCL id: %w", rank, err)
	}
	if len(got) != IDBytes {
		return id, fmt.Errorf("nccl: rank %d got a %d-byte NCCL id from the bootstrap, want %d", rank, len(got), IDBytes)
	}
	copy(id[:], got)
	if rank == 0 && string(got) != string(mine) {
		return id, fmt.Errorf("nccl: rank 0's own NCCL id came back changed from the bootstrap")
	}
	return id, nil
}
