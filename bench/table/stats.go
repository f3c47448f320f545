package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// summary is the median and 99th percentile of a set of durations.
type summary struct {
	median, p99 time.Duration
}

func summarize(samples []time.Duration) summary {
	s := slices.Clone(samples)
	slices.Sort(s)
	return summary{median: median(s), p99: percentile(s, 99)}
}

func median[T int64 | float64 | time.Duration](sorted []T) T {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted values by
// the nearest-rank method.
func percentile[T int64 | float64 | time.Duration](sorted []T, p float64) T {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms formats d in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }

// ratio is a/b, the form every ratio of the table takes.
func ratio[T int64 | float64 | time.Duration](a, b T) float64 { return float64(a) / float64(b) }

// rowRatio is of(row a) over of(row b) in rows; NaN when either was not
// measured.
func rowRatio[T any](rows map[string]T, a, b string, of func(T) time.Duration) float64 {
	sa, oka := rows[a]
	sb, okb := rows[b]
	if !oka || !okb {
		return math.NaN()
	}
	return ratio(of(sa), of(sb))
}
