package sim

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one policy's line in a plot.
type Series struct {
	Name string
	XY   plotter.XYs
}

// CDF returns the empirical CDF of v (NaN dropped), at most maxPoints points.
func CDF(v []float64, maxPoints int) plotter.XYs {
	s := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s = append(s, x)
		}
	}
	sort.Float64s(s)
	step := 1
	if maxPoints > 0 && len(s) > maxPoints {
		step = len(s) / maxPoints
	}
	var out plotter.XYs
	for k := 0; k < len(s); k += step {
		out = append(out, plotter.XY{X: s[k], Y: float64(k+1) / float64(len(s))})
	}
	if len(s) > 0 && (len(out) == 0 || out[len(out)-1].Y < 1) {
		out = append(out, plotter.XY{X: s[len(s)-1], Y: 1})
	}
	return out
}

// UtilisationSeries is busy/capacity per round against hours, averaged
// over buckets so that at most maxPoints points remain.
func UtilisationSeries(lg *Log, maxPoints int) plotter.XYs {
	n := len(lg.Rounds)
	if n == 0 {
		return nil
	}
	bucket := 1
	if maxPoints > 0 && n > maxPoints {
		bucket = (n + maxPoints - 1) / maxPoints
	}
	var out plotter.XYs
	for k := 0; k < n; k += bucket {
		busy, capa := 0.0, 0.0
		for _, r := range lg.Rounds[k:min(k+bucket, n)] {
			busy += r.BusyGPUSeconds
			capa += r.CapacityGPUSeconds
		}
		if capa > 0 {
			out = append(out, plotter.XY{X: lg.Rounds[k].Start / 3600, Y: busy / capa})
		}
	}
	return out
}

// SavePlot draws the series as lines and writes base.png and base.svg;
// logX puts the x axis on a log scale (all x must then be > 0).
func SavePlot(base, title, xlabel, ylabel string, logX bool, series []Series) error {
	p := plot.New()
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		for k := range series {
			kept := series[k].XY[:0:0]
			for _, xy := range series[k].XY {
				if xy.X > 0 {
					kept = append(kept, xy)
				}
			}
			series[k].XY = kept
		}
	}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	for k, s := range series {
		if len(s.XY) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.XY)
		if err != nil {
			return fmt.Errorf("plotting %q: %w", s.Name, err)
		}
		l.Color = plotutil.Color(k)
		l.Dashes = plotutil.Dashes(k / 7)
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	p.Legend.TextStyle.Color = color.Black
	for _, ext := range []string{".png", ".svg"} {
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, base+ext); err != nil {
			return fmt.Errorf("saving %s: %w", filepath.Base(base+ext), err)
		}
	}
	return nil
}
