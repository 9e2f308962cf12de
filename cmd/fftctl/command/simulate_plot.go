package command

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/nomad-fft/nomad-fft/allocator/sim"
)

// series is one policy's line in a plot.
type series struct {
	name string
	xy   plotter.XYs
}

// drawPlots draws one rate and seed's JCT CDF, FTF CDF and utilisation.
func drawPlots(o *simulateOptions, rate float64, seed uint64, results map[runKey]*runOut) error {
	var jct, ftf, util []series
	for _, p := range o.policies {
		ro := results[runKey{p, rate, seed}]
		if ro == nil || ro.err != nil || ro.res == nil {
			continue
		}
		var j, f []float64
		for _, r := range ro.res {
			if r.Measured && r.Finished {
				j = append(j, r.JCT/3600)
				f = append(f, r.FTF)
			}
		}
		jct = append(jct, series{p, cdf(j, 2000)})
		ftf = append(ftf, series{p, cdf(f, 2000)})
		// 150 buckets: a dozen policies' lines stay apart; per-round
		// values would draw noise.
		util = append(util, series{p, utilisationSeries(ro.log, 150)})
	}
	tag := fmt.Sprintf("r%g-s%d", rate, seed)
	if err := savePlot(filepath.Join(o.out, "jct-cdf-"+tag), "JCT CDF ("+tag+")", "JCT (hours, log scale)", "fraction of jobs", true, jct); err != nil {
		return err
	}
	if err := savePlot(filepath.Join(o.out, "ftf-cdf-"+tag), "Finish-time fairness CDF ("+tag+")", "rho = T_shared / T_isolated (log scale)", "fraction of jobs", true, ftf); err != nil {
		return err
	}
	return savePlot(filepath.Join(o.out, "utilisation-"+tag), "GPU utilisation ("+tag+")", "time (hours)", "busy / available GPU time", false, util)
}

// cdf returns the empirical CDF of v (NaN and Inf dropped), in at most
// about maxPoints points.
func cdf(v []float64, maxPoints int) plotter.XYs {
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

// utilisationSeries is busy/capacity per round against hours, averaged
// over buckets so that at most maxPoints points remain.
func utilisationSeries(lg *sim.Log, maxPoints int) plotter.XYs {
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

// lineColors are the Okabe-Ito colours (yellow left out, too pale on
// white): distinct for colour-blind readers too.
var lineColors = []color.Color{
	color.RGBA{0, 0, 0, 255},       // black
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{204, 121, 167, 255}, // reddish purple
}

// lineDashes are the dash patterns, used in turn once the colours run out.
var lineDashes = [][]vg.Length{
	nil,
	{vg.Points(6), vg.Points(3)},
	{vg.Points(1.5), vg.Points(2)},
	{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2)},
}

// lineStyle is the k-th series' colour and dashes: no two series of a
// plot share both while k < len(lineColors)*len(lineDashes).
func lineStyle(k int) (color.Color, []vg.Length) {
	return lineColors[k%len(lineColors)], lineDashes[(k/len(lineColors))%len(lineDashes)]
}

// Plot size and the gap between the plot and its legend.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 4.5 * vg.Inch
	legendGap  = 6 * vg.Millimeter
)

// savePlot draws the series as lines, with the legend right of the plot
// area so that it hides no curve, and writes base.png and base.svg; logX
// puts the x axis on a log scale (points with x <= 0 are dropped).
func savePlot(base, title, xlabel, ylabel string, logX bool, lines []series) error {
	p := plot.New()
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Color = color.Black
	// Text after the line sample, left-aligned (the zero XAlign is right).
	legend.TextStyle.XAlign = draw.XLeft
	legend.ThumbnailWidth = vg.Points(24)
	for k, s := range lines {
		xy := s.xy
		if logX {
			xy = positiveX(xy)
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("plotting %q: %w", s.name, err)
		}
		l.Color, l.Dashes = lineStyle(k)
		l.Width = vg.Points(1.4)
		p.Add(l)
		legend.Add(s.name, l)
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := saveWithLegend(p, &legend, base+ext); err != nil {
			return fmt.Errorf("saving %s: %w", filepath.Base(base+ext), err)
		}
	}
	return nil
}

// positiveX keeps the points with x > 0, which a log axis can show.
func positiveX(xy plotter.XYs) plotter.XYs {
	kept := xy[:0:0]
	for _, p := range xy {
		if p.X > 0 {
			kept = append(kept, p)
		}
	}
	return kept
}

// saveWithLegend draws p on the left and the legend in a column on the
// right of one canvas, and writes it to file in the format of its
// extension.
func saveWithLegend(p *plot.Plot, legend *plot.Legend, file string) error {
	canvas, err := draw.NewFormattedCanvas(plotWidth, plotHeight, filepath.Ext(file)[1:])
	if err != nil {
		return err
	}
	dc := draw.New(canvas)
	// Opaque background: a PNG viewer's dark theme would hide the axes.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	legendWidth := legend.Rectangle(dc).Size().X
	p.Draw(draw.Crop(dc, 0, -(legendWidth + legendGap), 0, 0))
	// Start the legend level with the top of the plot area, below the title.
	top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	legend.Draw(draw.Crop(dc, dc.Size().X-legendWidth, 0, 0, -top))
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
