package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var systemColors = map[string]color.Color{sysSidecar: color.RGBA{0, 90, 200, 255}, sysClientGo: color.RGBA{210, 40, 30, 255}}

// electionLines draws a panel per quantity against the number of
// elections, three to a row, with a line per system, replica count and
// renew setting: requests and Lease writes per second, open watches,
// kube-apiserver's and etcd's CPU seconds per minute and RSS, the
// candidates' median RSS, and the hand-off p99 of one election.
func electionLines(file string, es []electionsResult) error {
	type line struct {
		sys, renew string
		replicas   int
	}
	var order []line
	by := map[line][]electionsResult{}
	for _, e := range es {
		k := line{e.Sys, e.Renew, e.Replicas}
		if by[k] == nil {
			order = append(order, k)
		}
		by[k] = append(by[k], e)
	}
	panels := []struct {
		title string
		value func(electionsResult) float64
	}{
		{"API server requests/s", func(e electionsResult) float64 { return perSec(e.Requests.total(), e.Window) }},
		{"Lease writes/s", func(e electionsResult) float64 { return perSec(e.Requests.Writes, e.Window) }},
		{"open watches", func(e electionsResult) float64 { return float64(e.OpenWatches) }},
		{"kube-apiserver CPU s/min", func(e electionsResult) float64 { return perMinD(e.APIServer, e.Window) }},
		{"etcd CPU s/min", func(e electionsResult) float64 { return perMinD(e.Etcd, e.Window) }},
		{"hand-off p99 (ms)", func(e electionsResult) float64 {
			d := sorted(e.Handoffs, lat)
			if len(d) == 0 {
				return math.NaN()
			}
			return float64(pct(d, 99)) / float64(time.Millisecond)
		}},
		{"kube-apiserver RSS (MiB)", func(e electionsResult) float64 { return mibOf(e.APIServerRSS) }},
		{"etcd RSS (MiB)", func(e electionsResult) float64 { return mibOf(e.EtcdRSS) }},
		{"candidate RSS, median (MiB)", func(e electionsResult) float64 { m, _ := medianMax(e.CandRSS); return mibOf(m) }},
	}
	const cols = 3
	var grid [][]*plot.Plot
	for i, p := range panels {
		if i%cols == 0 {
			grid = append(grid, nil)
		}
		pl := plot.New()
		pl.Title.Text = p.title
		pl.X.Label.Text = "elections"
		pl.Legend.Top, pl.Legend.Left = true, true
		for n, k := range order {
			var pts plotter.XYs
			for _, e := range by[k] {
				if v := p.value(e); !math.IsNaN(v) {
					pts = append(pts, plotter.XY{X: float64(e.Elections), Y: v})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color = systemColors[k.sys], systemColors[k.sys]
			l.Dashes = lineDashes[n/2%len(lineDashes)]
			s.Shape = draw.CircleGlyph{}
			pl.Add(l, s)
			if i == 0 {
				pl.Legend.Add(fmt.Sprintf("%s ×%d, renew %s", k.sys, k.replicas, k.renew), l, s)
			}
		}
		grid[len(grid)-1] = append(grid[len(grid)-1], pl)
	}
	img := vgimg.New(15*vg.Inch, vg.Length(4*len(grid))*vg.Inch)
	dc := draw.New(img)
	canvases := plot.Align(grid, draw.Tiles{Rows: len(grid), Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4}, dc)
	for r, row := range grid {
		for c, pl := range row {
			pl.Draw(canvases[r][c])
		}
	}
	return savePNG(img, file)
}

// lineDashes tell the replica counts and renew settings of one system
// apart.
var lineDashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// savePNG writes the image as a PNG file.
func savePNG(img *vgimg.Canvas, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
