package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jethook/jethook/forward"
)

// chartSeries is one strategy's requests per second.
type chartSeries struct {
	name      string
	perSecond []int
}

var chartColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
	"#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"}

// writeChart draws requests per second over time, one line per strategy,
// with the outage shaded, as a self-contained SVG.
func writeChart(w io.Writer, series []chartSeries, sc forward.Scenario) {
	const width, height, left, bottom, top, right = 960.0, 480.0, 60.0, 40.0, 20.0, 220.0
	maxX, maxY := 1, 1
	for _, s := range series {
		maxX = max(maxX, len(s.perSecond))
		for _, v := range s.perSecond {
			maxY = max(maxY, v)
		}
	}
	plotW, plotH := width-left-right, height-top-bottom
	x := func(sec float64) float64 { return left + sec/float64(maxX)*plotW }
	y := func(v float64) float64 { return top + plotH - v/float64(maxY)*plotH }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	o0, o1 := sc.OutageStart.Seconds(), (sc.OutageStart + sc.Outage).Seconds()
	fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f2d7d5"/>`+"\n", x(o0), top, x(o1)-x(o0), plotH)
	fmt.Fprintf(w, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	fmt.Fprintf(w, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, top+plotH)
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f">%d req/s</text>`+"\n", 4.0, top+4, maxY)
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f">0</text>`+"\n", left-14, top+plotH+4)
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", left+plotW, height-12, short(secondsDur(maxX)))
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f">outage</text>`+"\n", x(o0)+4, top+14)
	for i, s := range series {
		color := chartColors[i%len(chartColors)]
		var pts strings.Builder
		for sec, v := range s.perSecond {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(float64(sec)), y(float64(v)))
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`+"\n", color, strings.TrimSpace(pts.String()))
		ly := top + 14 + float64(i)*16
		fmt.Fprintf(w, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`+"\n", width-right+10, ly-4, width-right+30, ly-4, color)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f">%s</text>`+"\n", width-right+36, ly, s.name)
	}
	fmt.Fprintln(w, "</svg>")
}

func secondsDur(s int) time.Duration { return time.Duration(s) * time.Second }
