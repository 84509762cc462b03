package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sagellm/kvevict/sim"
)

// palette has a distinct colour for each of a dozen strategies.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0x00, 0x00, 0x80, 0xff}, color.RGBA{0x80, 0x80, 0x00, 0xff},
}

// yTicks labels the hit ratio every 0.1 up to top.
func yTicks(top float64) []plot.Tick {
	var ticks []plot.Tick
	for i := 0; i <= int(math.Round(top*10)); i++ {
		v := float64(i) / 10
		ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprintf("%.1f", v)})
	}
	return ticks
}

// plotHitRatio draws block hit ratio against capacity, one line per
// strategy and a thick dashed black one for Belady, to path (.svg or .png).
func plotHitRatio(path, workload, mode string, reports []sim.Report) error {
	if len(reports) == 0 {
		return fmt.Errorf("plot: nothing to draw")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Prefix hit ratio, %s (%s)", workload, mode)
	p.X.Label.Text = "capacity (blocks, log scale)"
	p.Y.Label.Text = "block hit ratio"
	p.X.Scale = plot.LogScale{}
	top := 0.0
	for _, r := range reports {
		top = max(top, r.HitRatio)
	}
	// The top 40% is left for the legend: top-left, above the lines.
	p.Y.Min, p.Y.Max = 0, min(math.Ceil(top/0.6*10)/10, 1)
	p.Y.Tick.Marker = plot.ConstantTicks(yTicks(p.Y.Max))
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	var names []string
	series := map[string]plotter.XYs{}
	for _, r := range reports {
		if _, ok := series[r.Strategy]; !ok {
			names = append(names, r.Strategy)
		}
		series[r.Strategy] = append(series[r.Strategy], plotter.XY{X: float64(r.CapacityBlocks), Y: r.HitRatio})
	}
	var ticks []plot.Tick
	for _, xy := range series[names[0]] {
		ticks = append(ticks, plot.Tick{Value: xy.X, Label: fmt.Sprint(xy.X)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks) // the capacities run
	for i, name := range names {
		xys := series[name]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		if name == sim.BeladyName {
			line.Color = color.Black
			line.Width = vg.Points(2)
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			points.Color = color.Black
			points.Shape = draw.BoxGlyph{}
		} else {
			c := palette[i%len(palette)]
			line.Color, points.Color = c, c
			points.Shape = plotutil.Shape(i)
		}
		p.Add(line, points)
		p.Legend.Add(name, line, points)
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
