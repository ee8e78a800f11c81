package tensor

import "math"

var nan = math.NaN()
