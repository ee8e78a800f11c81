package spmd

import (
	"bytes"
	"sync"
)

// A launch id tells apart two launches that hold the same store key: two jobs started
// on one port with neither a secret nor LONGCA_JOB_ID (the key is then derived from
// "unnamed"). Rank 0 draws it for its first store and keeps it; every rank learns it
// from its first hello and shows it in every later one. A process that bootstraps more
// than once (Share, then the backend) can then never join the store of another launch:
// the store ends both (docs/cluster.md, Security).
type launchCache struct {
	mu  sync.Mutex
	ids map[string][]byte // by job id
}

// launches is this process's cache; a World may carry its own (tests run several
// "processes" in one).
var launches = &launchCache{}

// forServer is the launch id a store of job serves: the one this process already holds,
// else a fresh one, kept.
func (c *launchCache) forServer(job string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.ids[job]; ok {
		return id
	}
	if c.ids == nil {
		c.ids = map[string][]byte{}
	}
	id := randomBytes(launchBytes)
	c.ids[job] = id
	return id
}

// held is the launch id this process holds for job (nil before its first bootstrap).
func (c *launchCache) held(job string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[job]
}

// learn keeps the store's launch id for job; false when another is already held.
func (c *launchCache) learn(job string, id []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.ids[job]; ok {
		return bytes.Equal(old, id)
	}
	if c.ids == nil {
		c.ids = map[string][]byte{}
	}
	c.ids[job] = append([]byte(nil), id...)
	return true
}
