package dashboard

import (
	"fmt"

	"github.com/jethook/jethook/metrics"
)

// A chart is the last hour of one destination as SVG bars, one per minute:
// delivered attempts from the baseline up, failed ones stacked above them,
// both scaled to the busiest minute.
type chart struct {
	Width, Height int
	Bars          []bar
	Max           int // the busiest minute's attempts
	Delivered     int // in the hour
	Failed        int
	Title         string
}

// bar is one minute: rectangles in SVG coordinates (y grows downwards).
type bar struct {
	X, DeliveredY, DeliveredH, FailedY, FailedH int
	Title                                       string
}

const (
	barWidth = 3 // pixels per minute, a gap of one included
	chartH   = 32
)

func newChart(ms []metrics.Minute) chart {
	c := chart{Width: barWidth * len(ms), Height: chartH}
	for _, m := range ms {
		c.Max = max(c.Max, m.Delivered+m.Failed)
		c.Delivered += m.Delivered
		c.Failed += m.Failed
	}
	c.Title = fmt.Sprintf("last hour: %d delivered, %d failed attempts; busiest minute %d", c.Delivered, c.Failed, c.Max)
	if c.Max == 0 {
		return c
	}
	for i, m := range ms {
		if m.Delivered+m.Failed == 0 {
			continue
		}
		// At least a pixel for any minute with attempts.
		dh := scale(m.Delivered, c.Max)
		fh := scale(m.Failed, c.Max)
		c.Bars = append(c.Bars, bar{X: i * barWidth,
			DeliveredY: chartH - dh, DeliveredH: dh,
			FailedY: chartH - dh - fh, FailedH: fh,
			Title: fmt.Sprintf("%s: %d delivered, %d failed", m.Start.Format("15:04Z"), m.Delivered, m.Failed)})
	}
	return c
}

func scale(n, most int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*chartH/most)
}
