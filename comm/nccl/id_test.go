package nccl

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// chanExchange is a bootstrap in miniature: rank 0 publishes, everyone reads.
type chanExchange struct {
	once sync.Once
	pub  chan []byte
	val  []byte
}

func newChanExchange() *chanExchange { return &chanExchange{pub: make(chan []byte, 1)} }

func (x *chanExchange) forRank(rank int) Exchange {
	return func(id []byte) ([]byte, error) {
		if rank == 0 {
			x.pub <- append([]byte(nil), id...)
		}
		x.once.Do(func() { x.val = <-x.pub })
		return append([]byte(nil), x.val...), nil
	}
}

func TestShareIDEveryRankGetsRankZeros(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 2, 5, 8} {
		var made UniqueID
		for i := range made {
			made[i] = byte(rng.IntN(256))
		}
		var creates atomic.Int32
		create := func() (UniqueID, error) { creates.Add(1); return made, nil }
		x := newChanExchange()
		got := make([]UniqueID, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() { got[r], errs[r] = ShareID(r, x.forRank(r), create) })
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, errs[r])
			}
			if got[r] != made {
				t.Errorf("n=%d rank %d got a different id", n, r)
			}
		}
		if creates.Load() != 1 {
			t.Errorf("n=%d: id made %d times, want once (on rank 0)", n, creates.Load())
		}
	}
}

func TestShareIDErrors(t *testing.T) {
	okCreate := func() (UniqueID, error) { return UniqueID{1, 2, 3}, nil }
	cases := []struct {
		name   string
		rank   int
		ex     Exchange
		create func() (UniqueID, error)
		want   string
	}{
		{"no exchange", 2, nil, okCreate, "rank 2 has no id exchange"},
		{"short id", 1, func([]byte) ([]byte, error) { return make([]byte, 17), nil }, okCreate, "17-byte NCCL id"},
		{"bootstrap fails", 3, func([]byte) ([]byte, error) { return nil, errors.New("store unreachable") }, okCreate, "rank 3: sharing the NCCL id: store unreachable"},
		{"rank 0 id changed", 0, func([]byte) ([]byte, error) { return make([]byte, IDBytes), nil }, okCreate, "came back changed"},
		{"create fails", 0, func(b []byte) ([]byte, error) { return b, nil }, func() (UniqueID, error) { return UniqueID{}, errors.New("no network interface") }, "no network interface"},
	}
	for _, c := range cases {
		_, err := ShareID(c.rank, c.ex, c.create)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// Only rank 0 makes the id.
	_, err := ShareID(1, func(b []byte) ([]byte, error) {
		if b != nil {
			t.Error("rank 1 sent an id")
		}
		return make([]byte, IDBytes), nil
	}, func() (UniqueID, error) { t.Error("rank 1 made an id"); return UniqueID{}, nil })
	if err != nil {
		t.Fatal(err)
	}
}
