package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sagellm/kvevict/sim"
	"github.com/sagellm/kvevict/tier"
)

// Paul Tol's "bright" colour scheme, seven hues that stay apart for
// colour-blind readers too, its grey darkened to hold on white; black is
// Belady's.
var (
	tolBlue   = color.RGBA{0x44, 0x77, 0xaa, 0xff}
	tolCyan   = color.RGBA{0x66, 0xcc, 0xee, 0xff}
	tolGreen  = color.RGBA{0x22, 0x88, 0x33, 0xff}
	tolYellow = color.RGBA{0xcc, 0xbb, 0x44, 0xff}
	tolRed    = color.RGBA{0xee, 0x66, 0x77, 0xff}
	tolPurple = color.RGBA{0xaa, 0x33, 0x77, 0xff}
	tolGrey   = color.RGBA{0x88, 0x88, 0x88, 0xff}
)

// palette colours the lines that styles does not (each series of a
// cluster's plot, a router at several capacities) in order of first use:
// Tol's bright scheme, then the hues of his vibrant and muted ones that
// stay apart from those, so that a dozen lines get a dozen colours.
var palette = []color.Color{tolBlue, tolRed, tolGreen, tolPurple, tolYellow, tolCyan, tolGrey,
	color.RGBA{0xee, 0x77, 0x33, 0xff}, // vibrant orange
	color.RGBA{0x33, 0x22, 0x88, 0xff}, // muted indigo
	color.RGBA{0x00, 0x99, 0x88, 0xff}, // vibrant teal
	color.RGBA{0x88, 0x22, 0x55, 0xff}, // muted wine
	color.RGBA{0x99, 0x99, 0x33, 0xff}, // muted olive
	color.RGBA{0xee, 0x33, 0x77, 0xff}, // vibrant magenta
}

// lineStyle is how a strategy's line looks.
type lineStyle struct {
	color  color.Color
	dashed bool
	glyph  draw.GlyphDrawer
}

// styles gives each strategy a look of its own, the same in every plot:
// no two share a colour and a dash, and the two of a colour have other
// glyphs. A solid line has small filled glyphs and a dashed one large
// hollow glyphs, so that where two lines meet both glyphs show. The
// strategies whose hit ratios often lie close (the frequency ones;
// recency and its variants; the adaptive ones) differ in colour, and
// mostly in dash too.
var styles = map[string]lineStyle{
	"lru":            {tolBlue, false, draw.CircleGlyph{}},
	"slru":           {tolBlue, true, draw.TriangleGlyph{}},
	"qos_aware":      {tolYellow, false, draw.PyramidGlyph{}},
	"mru":            {tolYellow, true, draw.RingGlyph{}},
	"frequency_cost": {tolCyan, false, draw.CircleGlyph{}},
	"predictive":     {tolCyan, true, draw.RingGlyph{}},
	"auto":           {tolRed, false, draw.BoxGlyph{}},
	"filo":           {tolRed, true, draw.RingGlyph{}},
	"arc":            {tolGreen, false, draw.PyramidGlyph{}},
	"sieve":          {tolGreen, true, draw.SquareGlyph{}},
	"lfu":            {tolPurple, false, draw.PyramidGlyph{}},
	"s3fifo":         {tolPurple, true, draw.SquareGlyph{}},
	"fifo":           {tolGrey, false, draw.CrossGlyph{}},
	// kvevict cluster's routers.
	routeRoundRobin:  {tolGrey, false, draw.CrossGlyph{}},
	routeLeastLoaded: {tolYellow, true, draw.RingGlyph{}},
	routePrefix:      {tolBlue, false, draw.CircleGlyph{}},
	routeTTFT:        {tolRed, false, draw.BoxGlyph{}},
	routeApprox:      {tolPurple, true, draw.SquareGlyph{}},
	routeDirect:      {tolGreen, true, draw.PyramidGlyph{}},
	// compare -tier's cumulative hit ratios, by the deepest tier counted;
	// the strategy gives the colour.
	tierGPU:     {tolGrey, false, draw.CircleGlyph{}},
	tierHost:    {tolGrey, true, draw.TriangleGlyph{}},
	tierStorage: {tolBlue, true, draw.SquareGlyph{}},
}

// The cumulative curves of compare -tier's plot: the GPU's hits, then
// with the host tier's, then with storage's.
const (
	tierGPU     = "GPU"
	tierHost    = "+CPU"
	tierStorage = "+STORAGE"
)

// tierCurveStyles are the styles of the cumulative curves, in tier order.
var tierCurveStyles = map[tier.Medium]string{tier.GPU: tierGPU, tier.CPU: tierHost, tier.Storage: tierStorage}

// plotTiers draws each strategy's block hit ratio stacked by tier, as
// cumulative curves (the GPU's hits, then with each tier below), against
// the first tier below the GPU's size, beside Belady's MIN at every tier's
// capacity together.
func plotTiers(path string, o *options, workload string, rs []tierRow) error {
	host := o.tiers.specs[0]
	var set curveSet
	for i := range rs {
		r := &rs[i]
		x := float64(host.capacity(r.GPUCapacity))
		if r.Strategy == sim.BeladyName {
			if r.CapacityBlocks != r.GPUCapacity {
				set.add("belady total", sim.BeladyName, "", x, r.HitRatio)
			}
			continue
		}
		sum, label := 0.0, ""
		for k, ts := range r.Tiers {
			sum += float64(ts.Hits) / float64(max(r.BlockRefs, 1))
			if k > 0 {
				label += "+"
			}
			label += string(ts.Medium)
			set.add(r.Strategy+" "+label, tierCurveStyles[ts.Medium], r.Strategy, x, sum)
		}
	}
	xLabel := fmt.Sprintf("%s tier (blocks, log scale)", strings.ToLower(string(host.medium)))
	return drawCurves(path, workload+", block hits stacked by tier", xLabel, true, merge(set.cs))
}

// styleOf returns strategy name's look; a strategy without one in styles
// (TestPlotStyles requires one of every strategy) gets a grey dotted line.
func styleOf(name string) lineStyle {
	if st, ok := styles[name]; ok {
		return st
	}
	return lineStyle{tolGrey, true, draw.BoxGlyph{}}
}

// curve is one line of the plot: the strategies (or routers) whose hit
// ratios agree at every point, drawn once in the style of style.
type curve struct {
	names []string
	style string // a key of styles, or sim.BeladyName
	// color, if set, replaces style's colour: a key of styles gives its
	// colour, any other key the next of palette, in order of first use.
	color string
	xys   plotter.XYs // by capacity, or by engines
}

// curveSet gathers points into curves by name, in order of first
// appearance.
type curveSet struct {
	cs []curve
	at map[string]int
}

// add puts (x, y) on the curve named name, made in style and color if new;
// a curve keeps its first point at an x.
func (s *curveSet) add(name, style, color string, x, y float64) {
	if s.at == nil {
		s.at = map[string]int{}
	}
	i, ok := s.at[name]
	if !ok {
		i = len(s.cs)
		s.at[name] = i
		s.cs = append(s.cs, curve{names: []string{name}, style: style, color: color})
	}
	if !slices.ContainsFunc(s.cs[i].xys, func(xy plotter.XY) bool { return xy.X == x }) {
		s.cs[i].xys = append(s.cs[i].xys, plotter.XY{X: x, Y: y})
	}
}

// curves groups reports by strategy, in order of first appearance, and
// merges strategies with identical hit ratios at every capacity.
func curves(reports []sim.Report) []curve {
	var set curveSet
	for _, r := range reports {
		set.add(r.Strategy, r.Strategy, "", float64(r.CapacityBlocks), r.HitRatio)
	}
	return merge(set.cs)
}

// merge sorts each curve by x and draws curves with identical points once,
// Belady's apart.
func merge(out []curve) []curve {
	merged := out[:0]
	for _, c := range out {
		slices.SortFunc(c.xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
		j := slices.IndexFunc(merged, func(m curve) bool {
			return m.style != sim.BeladyName && c.style != sim.BeladyName && slices.Equal(m.xys, c.xys)
		})
		if j < 0 {
			merged = append(merged, c)
		} else {
			merged[j].names = append(merged[j].names, c.names...)
		}
	}
	return merged
}

// Plot geometry.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 5 * vg.Inch
	legendGap  = vg.Length(12)
)

// plotHitRatio draws block hit ratio against capacity, one line per group
// of strategies with identical results, in the style of the first, and a
// thick dashed black one for Belady, to path (.svg or .png, any case). The
// legend is beside the data. below names serve mode's tiers below the
// pool, "" without: over them Belady's line is no bound.
func plotHitRatio(path, workload, mode, below string, reports []sim.Report) error {
	if len(reports) == 0 {
		return fmt.Errorf("plot: nothing to draw")
	}
	cs := curves(reports)
	for i := range cs {
		if cs[i].style == sim.BeladyName {
			cs[i].names[0] = strategyLabel(cs[i].names[0], mode == "serve" && below == "")
		}
	}
	title := fmt.Sprintf("%s, %s mode", workload, mode)
	if below != "" {
		title += " over " + below
	}
	return drawCurves(path, title, "capacity (blocks, log scale)", true, cs)
}

// drawCurves draws block hit ratio against x, one line per curve in its
// style and a thick dashed black one for Belady's, to path (.svg or .png,
// any case), titled title. The legend is beside the data.
func drawCurves(path, title, xLabel string, logX bool, cs []curve) error {
	p := plot.New()
	// The y axis names the quantity; the title, what was run.
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "block hit ratio"
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	p.Add(plotter.NewGrid())

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range cs {
		for _, xy := range c.xys {
			lo, hi = min(lo, xy.Y), max(hi, xy.Y)
		}
	}
	p.Y.Min, p.Y.Max = yRange(lo, hi)
	p.Y.Tick.Marker = plot.ConstantTicks(yTicks(p.Y.Min, p.Y.Max))

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	var ticks []plot.Tick
	for _, xy := range cs[0].xys {
		ticks = append(ticks, plot.Tick{Value: xy.X, Label: fmt.Sprint(xy.X)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks) // the points run
	colors := map[string]color.Color{}
	colorOf := func(key string) color.Color {
		if st, ok := styles[key]; ok {
			return st.color
		}
		if _, ok := colors[key]; !ok {
			colors[key] = palette[len(colors)%len(palette)]
		}
		return colors[key]
	}
	for _, c := range cs {
		line, points, err := plotter.NewLinePoints(c.xys)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		label := strings.Join(c.names, " = ")
		if c.style == sim.BeladyName {
			line.Color, points.Color = color.Black, color.Black
			if c.color != "" {
				line.Color, points.Color = colorOf(c.color), colorOf(c.color)
			}
			line.Width = vg.Points(2)
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			points.Shape = draw.BoxGlyph{}
		} else {
			st := styleOf(c.style)
			if c.color != "" {
				st.color = colorOf(c.color)
			}
			line.Color, points.Color = st.color, st.color
			line.Width = vg.Points(1.5)
			if st.dashed {
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(2.5)}
			}
			points.Shape, points.Radius = st.glyph, vg.Points(3)
			if st.dashed {
				points.Radius = vg.Points(4.5)
			}
		}
		p.Add(line, points)
		legend.Add(label, line, points)
	}

	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	// The legend's width is known only from its text: measure it on a
	// scratch canvas, then size the image to hold the plot and the legend.
	scratch, err := draw.NewFormattedCanvas(plotWidth, plotHeight, format)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	legendWidth := legend.Rectangle(draw.New(scratch)).Size().X
	c, err := draw.NewFormattedCanvas(plotWidth+legendGap+legendWidth+legendGap, plotHeight, format)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -(legendGap + legendWidth + legendGap), 0, 0))
	legend.Draw(draw.Crop(dc, plotWidth+legendGap, -legendGap, 0, -legendGap))

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// yTicks labels the y axis every 0.05 or 0.1, about eight labels.
func yTicks(bottom, top float64) []plot.Tick {
	step := 0.1
	if top-bottom <= 0.4 {
		step = 0.05
	}
	var ticks []plot.Tick
	for i := math.Max(math.Ceil(bottom/step-1e-9), 0); i*step <= top+1e-9; i++ {
		v := i * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 2, 64)})
	}
	return ticks
}

// yRange fits the y axis to hit ratios from lo to hi: from 0, or from just
// below the data when it sits high above 0, to just above the data, on
// multiples of 0.05.
func yRange(lo, hi float64) (float64, float64) {
	const step = 0.05
	top := math.Min(math.Ceil((hi+step/4)/step)*step, 1)
	bottom := 0.0
	if lo > (hi-lo)*2 { // an axis from 0 would flatten the lines
		bottom = math.Floor((lo-step/4)/step) * step
	}
	if top <= bottom {
		top = bottom + step
	}
	return math.Max(bottom, 0), top
}

// plotCluster draws the cluster's hit ratio against its engines, one line
// per router (and strategy and capacity, when there are several), and the
// pooled Belady bound per capacity.
// seriesColor begins a colour key of drawCurves that no style has: the
// series it names gets the next colour of palette.
const seriesColor = "series "

func plotCluster(path, workload string, o *clusterOptions, rs []clusterRow) error {
	if len(rs) == 0 {
		return fmt.Errorf("plot: nothing to draw")
	}
	return drawCurves(path, workload+", a cluster behind each router", "engines (log scale)", true, clusterCurves(o, rs))
}

// clusterCurves are the lines of a cluster's plot: each series' hit
// ratio against engines, then the pooled bound's.
func clusterCurves(o *clusterOptions, rs []clusterRow) []curve {
	strategies, capacities := map[string]bool{}, map[int]bool{}
	for _, r := range rs {
		strategies[r.Strategy], capacities[r.CapacityBlocks] = true, true
	}
	// A router's dash and glyph, and a colour for each series (a router,
	// with the strategy and the capacity where several are run), so that
	// no two lines share one: ten series in two colours, by strategy,
	// could not be told apart.
	variant := func(r *clusterRow, belady bool) string {
		v := ""
		if len(strategies) > 1 && !belady {
			v += " " + r.Strategy
		}
		if len(capacities) > 1 {
			v += fmt.Sprintf(" %d", r.CapacityBlocks)
		}
		return v
	}
	var set curveSet
	for i := range rs {
		r := &rs[i]
		name := o.routerName(r) + variant(r, false)
		set.add(name, r.Router, seriesColor+name, float64(r.Engines), r.HitRatio)
	}
	for i := range rs {
		r := &rs[i]
		v := variant(r, true)
		set.add(sim.BeladyName+v+" (pooled)", sim.BeladyName, strings.TrimSpace(v), float64(r.Engines), r.PooledBelady)
	}
	return merge(set.cs)
}
