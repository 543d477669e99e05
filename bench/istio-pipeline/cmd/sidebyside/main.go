// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

// Command sidebyside prints BenchmarkPipeline's results as one table per
// size: per row the median of each side, the ratio, the goal and whether
// it is met. benchstat gives the spread; this gives the verdict.
//
//	go run ./cmd/sidebyside RAW_OUTPUT
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// line is a BenchmarkPipeline result line:
// BenchmarkPipeline/pools=N/gateways=G/side=S/ROW-P  1  V unit  V unit ...
var line = regexp.MustCompile(`^BenchmarkPipeline/pools=(\d+)/gateways=(\d+)/side=(\w+)/(\w+)(?:-\d+)?\s+\d+\s+(.*)$`)

type key struct {
	pools, gateways int
	row, side, unit string
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sidebyside RAW_OUTPUT")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	values := map[key][]float64{}
	cases := map[[2]int]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pools, _ := strconv.Atoi(m[1])
		gws, _ := strconv.Atoi(m[2])
		cases[[2]int{pools, gws}] = true
		fields := strings.Fields(m[5])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			k := key{pools, gws, m[4], m[3], fields[i+1]}
			values[k] = append(values[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(cases) == 0 {
		fmt.Fprintln(os.Stderr, "sidebyside: no BenchmarkPipeline results in", os.Args[1])
		os.Exit(1)
	}
	var order [][2]int
	for c := range cases {
		order = append(order, c)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i][0] != order[j][0] {
			return order[i][0] < order[j][0]
		}
		return order[i][1] < order[j][1]
	})
	type rowDef struct {
		title, row, unit string
		scale            float64 // divide by it for display
		shown            string  // display unit
		goal             string
		// met reports whether ours meets the goal given both medians.
		met func(istio, ours float64) bool
	}
	faster := func(x float64) func(float64, float64) bool {
		return func(istio, ours float64) bool { return ours > 0 && istio/ours >= x }
	}
	rows := []rowDef{
		{"cold: to every Gateway's complete config", "cold", "sec/op", 1e-3, "ms", ">= 5x faster", faster(5)},
		{"one HTTPRoute changed -> its RDS", "route", "sec/op", 1e-6, "us", ">= 10x faster", faster(10)},
		{"one pool's endpoints changed -> its EDS", "endpoint", "sec/op", 1e-6, "us", ">= 10x faster", faster(10)},
		{"live heap after settling", "cold", "live-MB", 1, "MB", "<= 1/2 of Istio's", func(istio, ours float64) bool { return ours <= istio/2 }},
		{"allocations per route change", "route", "allocs/op", 1, "", "", nil},
		{"allocations per endpoint change", "endpoint", "allocs/op", 1, "", "", nil},
		{"cold: allocations", "cold", "allocs/op", 1, "", "", nil},
		{"cold: CPU time (all threads)", "cold", "cpu-sec/op", 1e-3, "ms", "", nil},
		{"route change p99", "route", "p99-ns", 1e3, "us", "", nil},
		{"endpoint change p99", "endpoint", "p99-ns", 1e3, "us", "", nil},
	}
	for _, c := range order {
		fmt.Printf("\npools=%d gateways=%d (medians; n = samples per side)\n\n", c[0], c[1])
		fmt.Println("| row | Istio | infermesh | Istio / infermesh | goal | met |")
		fmt.Println("|---|---|---|---|---|---|")
		for _, r := range rows {
			unit := r.unit
			if unit == "sec/op" {
				unit = "ns/op" // go test prints ns/op; benchstat shows sec/op
			}
			is := values[key{c[0], c[1], r.row, "istio", unit}]
			ou := values[key{c[0], c[1], r.row, "infermesh", unit}]
			if len(is) == 0 || len(ou) == 0 {
				continue
			}
			mi, mo := median(is), median(ou)
			scale := r.scale
			if r.unit == "sec/op" {
				scale = r.scale * 1e9 // ns -> shown
			}
			verdict := ""
			if r.met != nil {
				verdict = "no"
				if r.met(mi, mo) {
					verdict = "yes"
				}
			}
			fmt.Printf("| %s | %s (n=%d) | %s (n=%d) | %.1fx | %s | %s |\n", r.title,
				show(mi/scale, r.shown), len(is), show(mo/scale, r.shown), len(ou), mi/mo, r.goal, verdict)
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func show(v float64, unit string) string {
	var s string
	switch {
	case v >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}
