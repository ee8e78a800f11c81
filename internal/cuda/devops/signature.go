package devops

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// A kernel's parameters, read from its extern "C" declaration, so a launch whose
// arguments do not match (a missing argument, an int where a long long goes) fails with
// the kernel's name instead of reading garbage on the device.

type param uint8

const (
	pPointer param = iota + 1
	pInt           // int: a Go int (packed as 32 bits)
	pLong          // long long: a Go uint64
	pFloat         // float: a Go float32
)

var (
	sigOnce sync.Once
	sigs    map[string][]param
	sigErr  error
)

var declRE = regexp.MustCompile(`extern "C" __global__ void (\w+)\(([^)]*)\)`)

// signatures parses every kernel declaration of the source.
func signatures() (map[string][]param, error) {
	sigOnce.Do(func() {
		sigs = map[string][]param{}
		for _, m := range declRE.FindAllStringSubmatch(source+runsKernels, -1) {
			var ps []param
			for _, a := range strings.Split(m[2], ",") {
				a = strings.TrimSpace(a)
				switch {
				case strings.Contains(a, "*"):
					ps = append(ps, pPointer)
				case strings.HasPrefix(a, "long long "):
					ps = append(ps, pLong)
				case strings.HasPrefix(a, "int "):
					ps = append(ps, pInt)
				case strings.HasPrefix(a, "float "):
					ps = append(ps, pFloat)
				default:
					sigErr = fmt.Errorf("devops: kernel %s: parameter %q of an unknown type", m[1], a)
					return
				}
			}
			sigs[m[1]] = ps
		}
	})
	return sigs, sigErr
}

// checkArgs matches launch arguments against the kernel's parameters.
func checkArgs(name string, args []any) error {
	s, err := signatures()
	if err != nil {
		return err
	}
	ps, ok := s[name]
	if !ok {
		return fmt.Errorf("devops: no kernel %s in the source", name)
	}
	if len(ps) != len(args) {
		return fmt.Errorf("devops: kernel %s takes %d arguments, launched with %d", name, len(ps), len(args))
	}
	for i, a := range args {
		var got param
		switch a.(type) {
		case interface{ DevicePtr() uintptr }:
			got = pPointer
		case int:
			got = pInt
		case uint64:
			got = pLong
		case float32:
			got = pFloat
		}
		if got != ps[i] {
			return fmt.Errorf("devops: kernel %s argument %d is %T, which does not fit its parameter", name, i, a)
		}
	}
	return nil
}
