package ref

// The two inner loops of the reference, blocked over four rows of a matrix so that each
// load of x or of an accumulator serves four products. Every dot product is summed in
// index order with one accumulator, so the same pair gives the same bits whichever
// side (query or key) drives the loop.

// dots sets out[j] = x . ys[j] for j in [a, b), where ys[j] = ys[j*d : j*d+d].
func dots[T num](x, ys []T, d, a, b int, out []T) {
	x = x[:d]
	j := a
	for ; j+4 <= b; j += 4 {
		// re-sliced to len(x) so that the loop has no bounds checks
		y0 := ys[j*d:][:len(x)]
		y1 := ys[(j+1)*d:][:len(x)]
		y2 := ys[(j+2)*d:][:len(x)]
		y3 := ys[(j+3)*d:][:len(x)]
		var s0, s1, s2, s3 T
		for i, xi := range x {
			s0 += xi * y0[i]
			s1 += xi * y1[i]
			s2 += xi * y2[i]
			s3 += xi * y3[i]
		}
		out[j], out[j+1], out[j+2], out[j+3] = s0, s1, s2, s3
	}
	for ; j < b; j++ {
		out[j] = dot(x, ys[j*d:j*d+d])
	}
}

// dot is x . y summed in index order.
func dot[T num](x, y []T) T {
	y = y[:len(x)]
	var s T
	for i, xi := range x {
		s += xi * y[i]
	}
	return s
}

// axpys adds sum over j in [a, b) of c[j] * ys[j] to acc.
func axpys[T num](c, ys []T, d, a, b int, acc []T) {
	acc = acc[:d]
	j := a
	for ; j+4 <= b; j += 4 {
		y0 := ys[j*d:][:len(acc)]
		y1 := ys[(j+1)*d:][:len(acc)]
		y2 := ys[(j+2)*d:][:len(acc)]
		y3 := ys[(j+3)*d:][:len(acc)]
		c0, c1, c2, c3 := c[j], c[j+1], c[j+2], c[j+3]
		for i := range acc {
			acc[i] += c0*y0[i] + c1*y1[i] + c2*y2[i] + c3*y3[i]
		}
	}
	for ; j < b; j++ {
		cj, y := c[j], ys[j*d:][:len(acc)]
		for i := range acc {
			acc[i] += cj * y[i]
		}
	}
}
