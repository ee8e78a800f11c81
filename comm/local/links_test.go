package local

import (
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/tensor"
)

// testLinks: 2 ranks per node; intra 10 MB/s, inter 1 MB/s with 20 ms latency.
var testLinks = Links{GPUsPerNode: 2, RanksPerGPU: 1,
	Local: Link{Bandwidth: 1e9},
	Intra: Link{Bandwidth: 10e6, Latency: 5 * time.Millisecond},
	Inter: Link{Bandwidth: 1e6, Latency: 20 * time.Millisecond}}

// TestLinksDelayMessages: a message takes bytes/bandwidth + latency of its link class,
// two messages from one port leave one after another, and a message to oneself is not
// delayed.
func TestLinksDelayMessages(t *testing.T) {
	cs := New(4, WithTimeout(10*time.Second), WithLinks(testLinks))
	buf := func() *tensor.Host { return tensor.NewHost(tensor.FP32, 12500) } // 50 KB
	got := make([]time.Duration, 4)
	start := time.Now()
	must(t, runAll(cs, func(c comm.Comm) error {
		switch c.Rank() {
		case 0: // two messages across nodes (to rank 2), one inside the node (to rank 1)
			for range 2 {
				if err := c.Send(buf(), 2); err != nil {
					return err
				}
			}
			return c.Send(buf(), 1)
		case 1:
			err := c.Recv(buf(), 0)
			got[1] = time.Since(start)
			return err
		case 2:
			if err := c.Recv(buf(), 0); err != nil {
				return err
			}
			got[0] = time.Since(start)
			err := c.Recv(buf(), 0)
			got[2] = time.Since(start)
			return err
		}
		return c.Group(func() error { // rank 3 to itself
			if err := c.Send(buf(), 3); err != nil {
				return err
			}
			err := c.Recv(buf(), 3)
			got[3] = time.Since(start)
			return err
		})
	}))
	// Slack for a loaded machine: sleeps overshoot, never undershoot.
	within := func(name string, d, want time.Duration) {
		t.Helper()
		if d < want || d > want+150*time.Millisecond {
			t.Errorf("%s: %v, want %v (+ at most 150ms of scheduling)", name, d, want)
		}
	}
	within("first inter-node message (50 KB at 1 MB/s + 20 ms)", got[0], 70*time.Millisecond)
	within("second inter-node message, after the first left the port", got[2], 120*time.Millisecond)
	within("intra-node message (its own port: 50 KB at 10 MB/s + 5 ms)", got[1], 10*time.Millisecond)
	if got[3] > 50*time.Millisecond {
		t.Errorf("a message to oneself took %v: it should not be delayed", got[3])
	}
}

// TestLinksSharedPort: with a shared inter-node port, two ranks of a node sending across
// at once leave one after the other.
func TestLinksSharedPort(t *testing.T) {
	l := testLinks
	l.Inter.Shared = true
	cs := New(4, WithTimeout(10*time.Second), WithLinks(l))
	var last time.Duration
	start := time.Now()
	must(t, runAll(cs, func(c comm.Comm) error {
		b := tensor.NewHost(tensor.FP32, 12500)
		switch c.Rank() {
		case 0, 1:
			return c.Send(b, c.Rank()+2)
		}
		err := c.Recv(b, c.Rank()-2)
		if d := time.Since(start); d > last {
			last = d
		}
		return err
	}))
	if last < 120*time.Millisecond {
		t.Fatalf("the second message through a shared port arrived after %v, want >= 120ms", last)
	}
}

// TestLinksConformance: the communicator still passes the conformance table with links.
func TestLinksConformance(t *testing.T) {
	fast := Links{GPUsPerNode: 2, RanksPerGPU: 1, Local: Link{Bandwidth: 1e10}, Intra: Link{Bandwidth: 1e10}, Inter: Link{Bandwidth: 1e9, Latency: time.Millisecond}}
	commtest.Run(t, New(4, WithTimeout(20*time.Second), WithLinks(fast)))
}

func TestLinksValidate(t *testing.T) {
	bad := testLinks
	bad.Inter.Bandwidth = 0
	if bad.Validate() == nil {
		t.Fatal("a link without bandwidth validated")
	}
	bad = testLinks
	bad.GPUsPerNode = 0
	if bad.Validate() == nil {
		t.Fatal("0 GPUs per node validated")
	}
}

// TestLinksWaitBoundedByTimeout: a message that lands after the receiver's timeout is a
// timeout at the timeout, not a wait until it lands (a link of latency_us 1e9 waited 17
// minutes past --timeout 10s and past an interrupt, the twelfth pass); an abort ends the
// wait at once.
func TestLinksWaitBoundedByTimeout(t *testing.T) {
	slow := Links{GPUsPerNode: 1, RanksPerGPU: 1, Local: Link{Bandwidth: 1e9}, Intra: Link{Bandwidth: 1e9},
		Inter: Link{Bandwidth: 1e9, Latency: time.Hour}}
	for _, abort := range []bool{false, true} {
		cs := New(2, WithTimeout(300*time.Millisecond), WithLinks(slow))
		start := time.Now()
		err := runAll(cs, func(c comm.Comm) error {
			if c.Rank() == 0 {
				if err := c.Send(tensor.NewHost(tensor.FP32, 4), 1); err != nil {
					return err
				}
				if abort {
					time.Sleep(50 * time.Millisecond)
					c.(*Comm).Abort(nil)
				}
				return nil
			}
			return c.Recv(tensor.NewHost(tensor.FP32, 4), 0)
		})
		took := time.Since(start)
		if err == nil {
			t.Fatalf("abort %v: a message an hour away was taken", abort)
		}
		if limit := 300*time.Millisecond + 2*time.Second; took > limit {
			t.Errorf("abort %v: the receive took %v: want it ended by its timeout (300ms)", abort, took)
		}
		if abort && took >= 300*time.Millisecond {
			t.Errorf("aborted after 50ms, the receive ended after %v: want it ended by the abort", took)
		}
	}
}
