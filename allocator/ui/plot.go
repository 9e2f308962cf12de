package ui

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// series is one line of a plot.
type series struct {
	Name, Color string
	Values      []float64
}

// Plot geometry, in SVG user units.
const (
	plotWidth, plotHeight = 640, 200
	padLeft, padRight     = 48, 12
	padTop, padBottom     = 28, 30
)

// plot draws the series over the rounds as an inline SVG line chart. yMax fixes the top of the
// axis (0: the largest value, at least 1). Every text is escaped; numbers are formatted here,
// so the markup is safe to embed.
func plot(title string, rounds []int, yMax float64, lines ...series) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		plotWidth, plotHeight, plotWidth, plotHeight, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>`, padLeft, template.HTMLEscapeString(title))
	if yMax <= 0 {
		yMax = 1
		for _, l := range lines {
			for _, v := range l.Values {
				yMax = math.Max(yMax, v)
			}
		}
	}
	x0, x1 := float64(padLeft), float64(plotWidth-padRight)
	y0, y1 := float64(plotHeight-padBottom), float64(padTop)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`, x0, y0, x1, y0)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`, x0, y0, x0, y1)
	for _, f := range []float64{0, 0.5, 1} {
		y := y0 - f*(y0-y1)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, x0-4, y+4, num(f*yMax))
		if f > 0 {
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`, x0, y, x1, y)
		}
	}
	n := len(rounds)
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="12" fill="#666">no round recorded yet</text>`, x0+10, (y0+y1)/2)
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11">round %d</text>`, x0, plotHeight-10, rounds[0])
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11" text-anchor="end">round %d</text>`, x1, plotHeight-10, rounds[n-1])
	xAt := func(i int) float64 {
		if n == 1 {
			return (x0 + x1) / 2
		}
		return x0 + float64(i)*(x1-x0)/float64(n-1)
	}
	for li, l := range lines {
		var pts []string
		for i, v := range l.Values {
			y := y0 - math.Min(v, yMax)/yMax*(y0-y1)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(i), y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, l.Color, strings.Join(pts, " "))
		if n == 1 {
			fmt.Fprintf(&b, `<circle cx="%s" r="3" fill="%s"/>`, strings.Replace(pts[0], ",", `" cy="`, 1), l.Color)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="11" fill="%s" text-anchor="end">%s</text>`,
			x1-float64(li)*140, l.Color, template.HTMLEscapeString(l.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// num writes an axis label: whole numbers without decimals.
func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
