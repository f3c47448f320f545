package main

import (
	"fmt"
	"time"
)

// latencies are the rows' latency summaries, by row name.
type latencies map[string]summary

// ratio is the ratio of row a's median to row b's; NaN when either was
// not measured.
func (l latencies) ratio(a, b string) float64 {
	return rowRatio(l, a, b, func(s summary) time.Duration { return s.median })
}

// latency times warmup+n iterations, each of which runs every row once,
// starting at a row that rotates from one iteration to the next, and prints
// the rows' medians and p99s.
func latency(rows []*row, c config) (latencies, error) {
	fmt.Printf("latency of one run of /bin/true: %d iterations after %d of warm-up, interleaved\n", c.n, c.warmup)
	samples := make(map[string][]time.Duration)
	for iter := range c.warmup + c.n {
		for k := range rows {
			r := rows[(iter+k)%len(rows)]
			start := time.Now()
			err := r.run()
			d := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("latency, %s: %w", r.name, err)
			}
			if iter >= c.warmup {
				samples[r.name] = append(samples[r.name], d)
			}
		}
	}
	l := latencies{}
	for _, r := range rows {
		l[r.name] = summarize(samples[r.name])
	}
	fmt.Printf("  %-7s %10s %10s %13s %13s\n", "row", "median ms", "p99 ms", "median/floor", "median/bwrap")
	for _, r := range rows {
		fmt.Printf("  %-7s %10s %10s %13.2f %13.2f\n", r.name, ms(l[r.name].median), ms(l[r.name].p99),
			l.ratio(r.name, "floor"), l.ratio(r.name, "bwrap"))
	}
	fmt.Println()
	return l, nil
}
