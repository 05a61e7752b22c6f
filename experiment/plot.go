package experiment

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plot renders the three figures as PNG and SVG. gonum/plot draws deterministically,
// so the same result gives the same files.
func (r *Result) plot(dir string) error {
	cc := r.Config.ccName()
	q := newPlot()
	q.Title.Text = fmt.Sprintf("%s, %d:1, %s: bottleneck queue", r.Config.Scenario, r.Config.Senders, cc)
	if x := r.MixInfo; x != nil {
		q.Title.Text = fmt.Sprintf("mix, %s, %s, %s:\nqueue of %s (largest peak)", x.Topology, x.Workload, cc, x.Bottleneck)
	}
	q.X.Label.Text = "time (µs)"
	q.Y.Label.Text = "queue (KB)"
	queue := r.QueueSamples()
	first, last, n := ends(queue)
	d := newDecimator(n, float64(first.T)/1e3, float64(last.T)/1e3)
	for s := range queue {
		d.add(plotter.XY{X: float64(s.T) / 1e3, Y: float64(s.Bytes) / 1e3})
	}
	line, err := plotter.NewLine(d.line())
	if err != nil {
		return err
	}
	line.Color = color.RGBA{R: 200, A: 255}
	q.Add(fewBoxes{line})
	if err := save(q, nil, dir, "queue"); err != nil {
		return err
	}
	if err := r.plotRates(dir, cc); err != nil {
		return err
	}
	if r.MixInfo != nil {
		return r.plotBuckets(dir)
	}
	return r.plotSlowdown(dir, cc)
}

// plotColumns is how many columns decimate cuts a line's time axis into: ten times
// the PNG's 768 pixels across, so that a column of pixels holds about ten of them,
// and more than a screen draws the SVG's 8 inches in.
const plotColumns = 8192

// decimate returns the points of a line in time order (pts sorted by X) that draw it
// at plotColumns columns across: in each column the first, lowest, highest and last
// point (M4, Jugel et al., VLDB 2014). The line through them takes, in every column,
// the heights the line through all of them takes, and enters and leaves it at the
// same points (TestDecimateKeepsEachColumnsEnvelope); drawn, the two differ only in
// the anti-aliasing of dense stretches (TestDecimateDrawsTheSameImage). A 75 ms
// incast sampled every 100 ns has 750,000 queue samples and 1.15 M rate samples:
// drawn whole, its plots took three quarters of the run's time and its SVGs 10–16
// MB. A line of at most 4·plotColumns points is drawn as it is.
func decimate(pts plotter.XYs) plotter.XYs {
	if len(pts) == 0 {
		return pts
	}
	d := newDecimator(len(pts), pts[0].X, pts[len(pts)-1].X)
	for _, p := range pts {
		d.add(p)
	}
	return d.line()
}

// decimator is decimate taking the line's points one at a time, knowing beforehand
// how many there are and the first and last X: a series read from its change points
// or a scratch file is decimated as it is read, never held whole.
type decimator struct {
	x0, span float64
	whole    bool // the line is drawn as it is
	out      plotter.XYs
	// The column being read: its first, lowest, highest and last point, and their
	// positions in the line.
	col                 int
	i                   int // points added
	first, lo, hi, last plotter.XY
	iFirst, iLo, iHi    int
}

// newDecimator returns a decimator of a line of n points from x0 to x1.
func newDecimator(n int, x0, x1 float64) *decimator {
	d := &decimator{x0: x0, span: x1 - x0, col: -1}
	if d.whole = n <= 4*plotColumns || !(d.span > 0); d.whole {
		d.out = make(plotter.XYs, 0, n)
	} else {
		d.out = make(plotter.XYs, 0, 4*plotColumns)
	}
	return d
}

// add takes the line's next point.
func (d *decimator) add(p plotter.XY) {
	if d.whole {
		d.out = append(d.out, p)
		return
	}
	c := min(int((p.X-d.x0)/d.span*plotColumns), plotColumns-1)
	if c != d.col {
		d.flush()
		d.col, d.first, d.lo, d.hi, d.iFirst, d.iLo, d.iHi = c, p, p, p, d.i, d.i, d.i
	} else {
		if p.Y < d.lo.Y {
			d.lo, d.iLo = p, d.i
		}
		if p.Y > d.hi.Y {
			d.hi, d.iHi = p, d.i
		}
	}
	d.last = p
	d.i++
}

// flush appends the column read so far: its first, lowest and highest in the order
// they came, and last, each once.
func (d *decimator) flush() {
	if d.col < 0 {
		return
	}
	lo, hi := d.lo, d.hi
	iLo, iHi := d.iLo, d.iHi
	if iHi < iLo {
		lo, hi, iLo, iHi = hi, lo, iHi, iLo
	}
	d.out = append(d.out, d.first)
	if iLo != d.iFirst {
		d.out = append(d.out, lo)
	}
	if iHi != iLo {
		d.out = append(d.out, hi)
	}
	if d.i-1 != iHi {
		d.out = append(d.out, d.last)
	}
	d.col = -1
}

// line returns the points kept.
func (d *decimator) line() plotter.XYs {
	d.flush()
	return d.out
}

// fewBoxes is a line that gives the plot's layout the glyph boxes of its extreme
// points only. A line's glyph boxes, a box of its width around every point, pad the
// plot so that no stroke is clipped; all alike, the leftmost, rightmost, lowest and
// highest decide the padding, and the layout asks for them again and again: the
// rate plot of a 75 ms incast (16 lines of 32,768 points) allocated 0.9 GB of boxes.
type fewBoxes struct{ *plotter.Line }

// GlyphBoxes returns the boxes of the line's first point of least and greatest X
// and Y (the axes are linear: normalizing keeps the order), in the line's order.
func (l fewBoxes) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	xy := l.XYs
	if len(xy) == 0 {
		return nil
	}
	var ext [4]int // least X, greatest X, least Y, greatest Y
	for i, q := range xy {
		if q.X < xy[ext[0]].X {
			ext[0] = i
		}
		if q.X > xy[ext[1]].X {
			ext[1] = i
		}
		if q.Y < xy[ext[2]].Y {
			ext[2] = i
		}
		if q.Y > xy[ext[3]].Y {
			ext[3] = i
		}
	}
	idx := ext[:]
	slices.Sort(idx)
	idx = slices.Compact(idx)
	pts := make(plotter.XYs, len(idx))
	for k, i := range idx {
		pts[k] = xy[i]
	}
	return (&plotter.Line{XYs: pts, LineStyle: l.LineStyle}).GlyphBoxes(p)
}

// maxLegend is the most flows the rate plot names in a legend; beyond it a colour
// scale above the plot maps colour to flow ID.
const maxLegend = 8

// plotRates draws every flow's paced rate.
func (r *Result) plotRates(dir, cc string) error {
	rp := newPlot()
	rp.Title.Text = fmt.Sprintf("%s, %s: per-flow paced rate", r.Config.Scenario, cc)
	rp.X.Label.Text = "time (µs)"
	rp.Y.Label.Text = "paced rate (Gb/s)"
	// Two reads of the samples (a virtual-time run's are in a scratch file): the
	// first finds each flow's points, the second decimates them as they come.
	type extent struct {
		n      int
		x0, x1 float64
	}
	extents := map[int]*extent{}
	if err := r.EachRate(func(s RateSample) {
		x := float64(s.T) / 1e3
		e := extents[s.Flow]
		if e == nil {
			e = &extent{x0: x}
			extents[s.Flow] = e
		}
		e.n++
		e.x1 = x
	}); err != nil {
		return err
	}
	series := make(map[int]*decimator, len(extents))
	for id, e := range extents {
		series[id] = newDecimator(e.n, e.x0, e.x1)
	}
	if err := r.EachRate(func(s RateSample) {
		series[s.Flow].add(plotter.XY{X: float64(s.T) / 1e3, Y: s.Rate / 1e9})
	}); err != nil {
		return err
	}
	ids := make([]int, 0, len(series))
	for id := range series {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var scale palette.ColorMap
	if len(ids) > maxLegend {
		scale = moreland.SmoothBlueRed()
		scale.SetMin(float64(ids[0]))
		scale.SetMax(float64(max(ids[len(ids)-1], ids[0]+1)))
	}
	for i, id := range ids {
		l, err := plotter.NewLine(series[id].line())
		if err != nil {
			return err
		}
		if scale == nil {
			l.Color = palette8(i)
			rp.Legend.Add(fmt.Sprintf("flow %d", id), l)
		} else if l.Color, err = scale.At(float64(id)); err != nil {
			return err
		}
		rp.Add(fewBoxes{l})
	}
	if scale == nil {
		rp.Y.Max *= 1.25 // room for the legend above the lines
	}
	rp.Legend.Top = true
	return save(rp, scale, dir, "rates")
}

// plotSlowdown draws the incast and fairness scenarios' FCT slowdown quantiles by flow
// size, each quantile with its own colour, dashes and glyph and its value in the
// legend, so that close quantiles stay apart.
func (r *Result) plotSlowdown(dir, cc string) error {
	fp := newPlot()
	fp.Title.Text = fmt.Sprintf("%s, %s: FCT slowdown by flow size (finished flows)", r.Config.Scenario, cc)
	fp.X.Label.Text = "flow size (KB)"
	fp.Y.Label.Text = "slowdown"
	bySize := map[int][]float64{}
	for _, f := range r.Flows {
		if f.Finished {
			bySize[f.Size] = append(bySize[f.Size], f.Slowdown)
		}
	}
	sizes := make([]int, 0, len(bySize))
	for s := range bySize {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	for k, q := range []float64{0.5, 0.95, 0.99} {
		var xy plotter.XYs
		for _, s := range sizes {
			v := bySize[s]
			sort.Float64s(v)
			xy = append(xy, plotter.XY{X: float64(s) / 1e3, Y: quantile(v, q)})
		}
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("p%g", q*100)
		if len(xy) == 1 {
			// One size (incast): the quantile as a level across the axis, its value
			// in the legend.
			label += fmt.Sprintf(" = %.2f", xy[0].Y)
			l.XYs = plotter.XYs{{X: 0, Y: xy[0].Y}, {X: 2 * xy[0].X, Y: xy[0].Y}}
		}
		styleQuantile(k, l, pts)
		fp.Add(l, pts)
		fp.Legend.Add(label, l, pts)
	}
	if len(sizes) == 1 {
		// Room above the levels for the legend.
		lo, hi := fp.Y.Min, fp.Y.Max
		fp.Y.Max = hi + 0.6*(hi-lo) + 0.01
	}
	fp.Legend.Top, fp.Legend.Left = true, true
	return save(fp, nil, dir, "fct")
}

// styleQuantile gives the k-th of p50, p95, p99 its colour, dashes and glyph.
func styleQuantile(k int, l *plotter.Line, pts *plotter.Scatter) {
	l.Color, pts.Color = palette8(k), palette8(k)
	l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}[k]
	pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.BoxGlyph{}}[k]
	pts.Radius = vg.Points([]float64{3, 4.5, 3}[k])
}

// newPlot is a plot with clean tick labels on both axes.
func newPlot() *plot.Plot {
	p := plot.New()
	p.X.Tick.Marker = cleanTicks{}
	p.Y.Tick.Marker = cleanTicks{}
	return p
}

// cleanTicks are gonum's default ticks labelled without trailing zeros: 250, not
// 250.00; 0.5, not 0.50.
type cleanTicks struct{}

func (cleanTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 10, 64)
		}
	}
	return ticks
}

const plotW, plotH, scaleH = 8 * vg.Inch, 4 * vg.Inch, 0.7 * vg.Inch

// save writes p as PNG and SVG; with a colour scale, the scale is drawn in a band
// above the plot.
func save(p *plot.Plot, scale palette.ColorMap, dir, name string) error {
	h := plotH
	if scale != nil {
		h += scaleH
	}
	for _, ext := range []string{"png", "svg"} {
		var c vg.CanvasWriterTo
		if ext == "png" {
			c = vgimg.PngCanvas{Canvas: vgimg.New(plotW, h)}
		} else {
			c = vgsvg.New(plotW, h)
		}
		dc := draw.New(c)
		if scale != nil {
			bar := plot.New()
			bar.Add(&plotter.ColorBar{ColorMap: scale})
			bar.HideY()
			bar.X.Label.Text = "flow ID (line colour)"
			bar.X.Tick.Marker = cleanTicks{}
			bar.Draw(draw.Crop(dc, 0, 0, plotH, 0))
			dc = draw.Crop(dc, 0, 0, 0, -scaleH)
		}
		p.Draw(dc)
		if err := writeTo(c, filepath.Join(dir, name+"."+ext)); err != nil {
			return err
		}
	}
	return nil
}

func writeTo(c io.WriterTo, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func palette8(i int) color.Color {
	c := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}}
	return c[i%len(c)]
}

// plotBuckets draws the mix's FCT slowdown the way the HPCC paper's Figure 11 does:
// flows sorted by size in buckets of 5% of the flows, each bucket at its upper
// percentile and labelled with its largest size; p50, p95 and p99 of the slowdown on
// a log scale.
func (r *Result) plotBuckets(dir string) error {
	x := r.MixInfo
	fp := newPlot()
	fp.Title.Text = fmt.Sprintf("mix, %s, %s, %s:\nFCT slowdown by flow size (finished flows)", x.Topology, x.Workload, r.Config.ccName())
	fp.X.Label.Text = "flow size (largest of each 5% of the flows by size)"
	fp.Y.Label.Text = "FCT slowdown"
	fp.Y.Scale = plot.LogScale{}
	fp.Y.Tick.Marker = plot.TickerFunc(slowdownTicks)
	buckets := sizeBuckets(r.Flows, percentSteps(5))
	var ticks []plot.Tick
	for i, b := range buckets {
		label := ""
		if i%2 == 1 || i == len(buckets)-1 {
			label = sizeLabel(b.Size)
		}
		ticks = append(ticks, plot.Tick{Value: b.To, Label: label})
	}
	fp.X.Tick.Marker = plot.ConstantTicks(ticks)
	fp.X.Min, fp.X.Max = 0, 100
	fp.Y.Min = 1
	for k, q := range []float64{0.5, 0.95, 0.99} {
		var xy plotter.XYs
		for _, b := range buckets {
			y := []float64{b.P50, b.P95, b.P99}[k]
			xy = append(xy, plotter.XY{X: b.To, Y: max(y, 1)})
			fp.Y.Max = max(fp.Y.Max, y*1.1)
		}
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		styleQuantile(k, l, pts)
		fp.Add(l, pts)
		fp.Legend.Add(fmt.Sprintf("p%g", q*100), l, pts)
	}
	fp.Y.Max = max(fp.Y.Max, 2)
	fp.Legend.Top, fp.Legend.Left = true, true
	return save(fp, nil, dir, "fct")
}

// sizeLabel is a short flow size for an axis: 700, 12K, 1.2M.
func sizeLabel(n int) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.3gM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.3gK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// slowdownTicks labels a log axis at 1, 2, 5, 10, 20, 50, … with unlabelled ticks at
// the other integers of each decade.
func slowdownTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for d := 1.0; d <= hi; d *= 10 {
		for m := 1.0; m < 10; m++ {
			v := d * m
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
