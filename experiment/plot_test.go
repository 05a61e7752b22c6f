package experiment

import (
	"image"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// queueLike is a line of n points 100 ns apart shaped like a switch queue: it drains
// towards empty, wanders, and now and then takes a burst.
func queueLike(n int, seed uint64) plotter.XYs {
	rng := rand.New(rand.NewPCG(seed, 1))
	pts := make(plotter.XYs, n)
	y := 0.0
	for i := range pts {
		y = math.Max(0, 0.999*y+5*rng.NormFloat64())
		if rng.IntN(2000) == 0 {
			y += 300 * rng.Float64()
		}
		pts[i] = plotter.XY{X: float64(i) / 10, Y: y}
	}
	return pts
}

// TestDecimateKeepsEachColumnsEnvelope: decimate keeps at most four points a column,
// in order, and in every column the first, lowest, highest and last point of the
// whole line, cross-checked against a plain pass over all the points.
func TestDecimateKeepsEachColumnsEnvelope(t *testing.T) {
	pts := queueLike(200_000, 1)
	got := decimate(pts)
	if len(got) > 4*plotColumns {
		t.Fatalf("%d points kept, want at most %d", len(got), 4*plotColumns)
	}
	type envelope struct {
		first, last, lo, hi plotter.XY
		seen                bool
	}
	x0, span := pts[0].X, pts[len(pts)-1].X-pts[0].X // the whole line's, as decimate's
	columns := func(line plotter.XYs) []envelope {
		env := make([]envelope, plotColumns)
		for _, p := range line {
			e := &env[min(int((p.X-x0)/span*plotColumns), plotColumns-1)]
			if !e.seen {
				*e = envelope{first: p, lo: p, hi: p, seen: true}
			}
			e.last = p
			if p.Y < e.lo.Y {
				e.lo = p
			}
			if p.Y > e.hi.Y {
				e.hi = p
			}
		}
		return env
	}
	want, have := columns(pts), columns(got)
	for c := range want {
		if w, h := want[c], have[c]; w.first != h.first || w.last != h.last || w.lo.Y != h.lo.Y || w.hi.Y != h.hi.Y {
			t.Fatalf("column %d: kept %+v, the line has %+v", c, h, w)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].X <= got[i-1].X {
			t.Fatalf("point %d at X %v after %v: not in order", i, got[i].X, got[i-1].X)
		}
	}
	if short := pts[:4*plotColumns]; len(decimate(short)) != len(short) {
		t.Errorf("a line of %d points was decimated", len(short))
	}
}

// TestDecimateDrawsTheSameImage: the queue plot's PNG drawn from the decimated line
// and from every point differ by more than half a shade in fewer than 1 % of their
// pixels (anti-aliased edges where a column's segments now join other points). A
// control of as many points taken every nth misses peaks and differs in more.
func TestDecimateDrawsTheSameImage(t *testing.T) {
	pts := queueLike(250_000, 2)
	render := func(line plotter.XYs) *image.RGBA {
		p := newPlot()
		l, err := plotter.NewLine(line)
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		c := vgimg.New(plotW, plotH)
		p.Draw(draw.New(c))
		return c.Image().(*image.RGBA)
	}
	// differ is the share of pixels whose shades differ by more than half.
	differ := func(a, b *image.RGBA) float64 {
		n := 0
		for i := 0; i < len(a.Pix); i += 4 {
			if abs(int(a.Pix[i])+int(a.Pix[i+1])+int(a.Pix[i+2])-int(b.Pix[i])-int(b.Pix[i+1])-int(b.Pix[i+2])) > 3*128 {
				n++
			}
		}
		return float64(n) / float64(len(a.Pix)/4)
	}
	dec := decimate(pts)
	var naive plotter.XYs
	for i := 0; i < len(pts); i += len(pts) / len(dec) {
		naive = append(naive, pts[i])
	}
	all := render(pts)
	d, n := differ(all, render(dec)), differ(all, render(naive))
	t.Logf("decimated (%d of %d points): %.2f %% of the pixels differ; every nth point: %.2f %%", len(dec), len(pts), 100*d, 100*n)
	if d >= 0.01 {
		t.Errorf("decimated: %.2f %% of the pixels differ, want under 1 %%", 100*d)
	}
	if n < 0.01 {
		t.Errorf("every nth point: %.2f %% of the pixels differ: the check cannot tell it from the decimated line", 100*n)
	}
}

func abs(v int) int { return max(v, -v) }
