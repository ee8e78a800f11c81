package commtest

import (
	"errors"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

func collectiveCases() []Case {
	return []Case{
		{"all-to-all", allToAll},
		{"all-gather", allGather},
		{"reduce-scatter-sum", reduceScatter},
		{"all-reduce-sum", func(c comm.Comm) error { return allReduce(c, comm.Sum) }},
		{"all-reduce-max", func(c comm.Comm) error { return allReduce(c, comm.Max) }},
		{"barrier", func(c comm.Comm) error { return call("barrier", c.Barrier()) }},
	}
}

func allToAll(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	var errs []error
	for _, dt := range dtypes {
		send := fill(dt, n, func(p, i int) float64 { return a2aValue(r, p, i) })
		recv := tensor.NewHost(dt, n*rows, cols)
		if err := c.AllToAll(send, recv); err != nil {
			return call("all-to-all "+dt.String(), err)
		}
		errs = append(errs, check("all-to-all "+dt.String(), recv, n, func(p, i int) float64 { return a2aValue(p, r, i) }))
	}
	return errors.Join(errs...)
}

func allGather(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	var errs []error
	for _, dt := range dtypes {
		send := fill(dt, 1, func(_, i int) float64 { return a2aValue(r, 0, i) })
		recv := tensor.NewHost(dt, n*rows, cols)
		if err := c.AllGather(send, recv); err != nil {
			return call("all-gather "+dt.String(), err)
		}
		errs = append(errs, check("all-gather "+dt.String(), recv, n, func(p, i int) float64 { return a2aValue(p, 0, i) }))
	}
	return errors.Join(errs...)
}

func reduceScatter(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	var errs []error
	for _, dt := range reduceTypes {
		// Rank q's block p holds sumValue(q, i+p): each kept block differs.
		send := fill(dt, n, func(p, i int) float64 { return sumValue(r, i+p) })
		recv := tensor.NewHost(dt, rows, cols)
		if err := c.ReduceScatter(send, recv); err != nil {
			return call("reduce-scatter "+dt.String(), err)
		}
		errs = append(errs, check("reduce-scatter "+dt.String(), recv, 1, func(_, i int) float64 {
			s := 0.0
			for q := range n {
				s += sumValue(q, i+r)
			}
			return s
		}))
	}
	return errors.Join(errs...)
}

func allReduce(c comm.Comm, op comm.Op) error {
	r, n := c.Rank(), c.Size()
	val := sumValue
	if op == comm.Max {
		val = maxValue
	}
	var errs []error
	for _, dt := range reduceTypes {
		buf := fill(dt, 1, func(_, i int) float64 { return val(r, i) })
		what := fmt.Sprintf("all-reduce %s %s", op, dt)
		if err := c.AllReduce(buf, op); err != nil {
			return call(what, err)
		}
		errs = append(errs, check(what, buf, 1, func(_, i int) float64 {
			acc := val(0, i)
			for q := 1; q < n; q++ {
				if op == comm.Max {
					acc = max(acc, val(q, i))
				} else {
					acc += val(q, i)
				}
			}
			return acc
		}))
	}
	return errors.Join(errs...)
}
