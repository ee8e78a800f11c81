package local

import (
	"sync"
	"time"
)

// mailbox is an unbounded FIFO of messages from one rank to another, so a Send never
// blocks and a Recv waits (with a deadline) for the next message in order.
type mailbox struct {
	mu    sync.Mutex
	queue []Message
	ready chan struct{} // holds a token while the queue may be non-empty
}

func newMailbox() *mailbox { return &mailbox{ready: make(chan struct{}, 1)} }

func (b *mailbox) put(m Message) {
	b.mu.Lock()
	b.queue = append(b.queue, m)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// take returns the oldest message, or false when none arrived before the deadline or
// abort was closed.
func (b *mailbox) take(deadline time.Time, abort <-chan struct{}) (Message, bool) {
	for {
		b.mu.Lock()
		if len(b.queue) > 0 {
			m := b.queue[0]
			b.queue[0] = nil
			b.queue = b.queue[1:]
			more := len(b.queue) > 0
			b.mu.Unlock()
			if more {
				select {
				case b.ready <- struct{}{}:
				default:
				}
			}
			return m, true
		}
		b.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, false
		}
		t := time.NewTimer(wait)
		select {
		case <-b.ready:
			t.Stop()
		case <-t.C:
		case <-abort:
			t.Stop()
			return nil, false
		}
	}
}
