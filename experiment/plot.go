package experiment

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plot renders the three figures as PNG and SVG. gonum/plot draws deterministically,
// so the same result gives the same files.
func (r *Result) plot(dir string) error {
	cc := string(r.Config.CC)
	q := plot.New()
	q.Title.Text = fmt.Sprintf("%s, %d:1, %s: bottleneck queue", r.Config.Scenario, r.Config.Senders, cc)
	if x := r.MixInfo; x != nil {
		q.Title.Text = fmt.Sprintf("mix, %s, %s at load %.2f, %s: queue of %s (largest peak)", x.Topology, x.CDF, r.Config.Load, cc, x.Bottleneck)
	}
	q.X.Label.Text = "time (µs)"
	q.Y.Label.Text = "queue (KB)"
	pts := make(plotter.XYs, len(r.Queue))
	for i, s := range r.Queue {
		pts[i] = plotter.XY{X: float64(s.T) / 1e3, Y: float64(s.Bytes) / 1e3}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Color = color.RGBA{R: 200, A: 255}
	q.Add(line)
	if err := save(q, dir, "queue"); err != nil {
		return err
	}

	rp := plot.New()
	rp.Title.Text = fmt.Sprintf("%s, %s: per-flow pacing rate", r.Config.Scenario, cc)
	rp.X.Label.Text = "time (µs)"
	rp.Y.Label.Text = "rate (Gb/s)"
	series := map[int]plotter.XYs{}
	for _, s := range r.Rates {
		series[s.Flow] = append(series[s.Flow], plotter.XY{X: float64(s.T) / 1e3, Y: s.Rate / 1e9})
	}
	ids := make([]int, 0, len(series))
	for id := range series {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		l, err := plotter.NewLine(series[id])
		if err != nil {
			return err
		}
		l.Color = palette(id)
		rp.Add(l)
	}
	if err := save(rp, dir, "rates"); err != nil {
		return err
	}

	if r.MixInfo != nil {
		return r.plotBuckets(dir)
	}
	fp := plot.New()
	fp.Title.Text = fmt.Sprintf("%s, %s: FCT slowdown by flow size", r.Config.Scenario, cc)
	fp.X.Label.Text = "flow size (KB)"
	fp.Y.Label.Text = "slowdown"
	bySize := map[int][]float64{}
	for _, f := range r.Flows {
		bySize[f.Size] = append(bySize[f.Size], f.Slowdown)
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
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		sc.Color = palette(k)
		fp.Add(sc)
		fp.Legend.Add(fmt.Sprintf("p%g", q*100), sc)
	}
	return save(fp, dir, "fct")
}

func save(p *plot.Plot, dir, name string) error {
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, name+"."+ext)); err != nil {
			return err
		}
	}
	return nil
}

func palette(i int) color.Color {
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
	fp := plot.New()
	fp.Title.Text = fmt.Sprintf("mix, %s, %s at load %.2f, %s: FCT slowdown by flow size", x.Topology, x.CDF, r.Config.Load, r.Config.CC)
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
		l.Color, pts.Color = palette(k), palette(k)
		l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}}[k]
		pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}}[k]
		fp.Add(l, pts)
		fp.Legend.Add(fmt.Sprintf("p%g", q*100), l, pts)
	}
	fp.Y.Max = max(fp.Y.Max, 2)
	fp.Legend.Top, fp.Legend.Left = true, true
	return save(fp, dir, "fct")
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
