package main

import (
	"fmt"
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var systemColors = map[string]color.Color{sysSidecar: color.RGBA{0, 90, 200, 255}, sysClientGo: color.RGBA{210, 40, 30, 255}}

// electionBars draws three panels side by side, each with a bar per system
// and configuration (elections × replicas): requests per second, Lease
// writes per second, and kube-apiserver + etcd CPU seconds per minute.
func electionBars(file string, es []electionsResult) error {
	var configs []string
	bySys := map[string]map[string]electionsResult{}
	for _, e := range es {
		c := fmt.Sprintf("%d×%d", e.Elections, e.Replicas)
		if bySys[e.Sys] == nil {
			bySys[e.Sys] = map[string]electionsResult{}
		}
		configs = appendNew(configs, c)
		bySys[e.Sys][c] = e
	}
	panels := []struct {
		title string
		value func(electionsResult) float64
	}{
		{"API server requests/s", func(e electionsResult) float64 { return perSec(e.Requests.total(), e.Window) }},
		{"Lease writes/s", func(e electionsResult) float64 { return perSec(e.Requests.Writes, e.Window) }},
		{"kube-apiserver + etcd CPU s/min", func(e electionsResult) float64 { return perMinD(e.APIServer+e.Etcd, e.Window) }},
	}
	row := make([]*plot.Plot, len(panels))
	for i, p := range panels {
		pl, err := barPanel(p.title, configs, bySys, p.value)
		if err != nil {
			return err
		}
		row[i] = pl
	}
	img := vgimg.New(12*vg.Inch, 4*vg.Inch)
	dc := draw.New(img)
	canvases := plot.Align([][]*plot.Plot{row}, draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter * 4}, dc)
	for i, pl := range row {
		pl.Draw(canvases[0][i])
	}
	return savePNG(img, file)
}

// barPanel is one panel: for each system a bar per configuration.
func barPanel(title string, configs []string, bySys map[string]map[string]electionsResult, value func(electionsResult) float64) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = "elections × replicas"
	pl.Legend.Top, pl.Legend.Left = true, true
	width := vg.Points(18)
	for i, sys := range []string{sysSidecar, sysClientGo} {
		vals := make(plotter.Values, len(configs))
		for j, c := range configs {
			vals[j] = value(bySys[sys][c])
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color = systemColors[sys]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(2*i-1) * width / 2
		pl.Add(bars)
		pl.Legend.Add(sys, bars)
	}
	pl.NominalX(configs...)
	return pl, nil
}

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
