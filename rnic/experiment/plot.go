package experiment

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plot renders the three figures as PNG and SVG. gonum/plot draws deterministically,
// so the same result gives the same files.
func (r *Result) plot(dir string) error {
	cc := string(r.Config.CC)
	q := plot.New()
	q.Title.Text = fmt.Sprintf("%s, %d:1, %s: bottleneck queue", r.Config.Scenario, r.Config.Senders, cc)
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
