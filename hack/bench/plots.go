package main

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The plots, written next to benchmarks.md.
const (
	handoffPlot   = "benchmarks-handoff.png"
	failoverPlot  = "benchmarks-failover.png"
	electionsPlot = "benchmarks-elections.png"
)

var curveColors = map[string]color.Color{
	key(sysSidecar, profDefault, "lease"):    color.RGBA{0, 90, 200, 255},
	key(sysSidecar, profShort, "lease"):      color.RGBA{90, 160, 255, 255},
	key(sysSidecar, profDefault, "sqlite"):   color.RGBA{0, 150, 80, 255},
	key(sysSidecar, profShort, "sqlite"):     color.RGBA{100, 210, 140, 255},
	key(sysSidecar, profDefault, "postgres"): color.RGBA{120, 40, 170, 255},
	key(sysSidecar, profShort, "postgres"):   color.RGBA{190, 130, 230, 255},
	key(sysClientGo, profDefault, "lease"):   color.RGBA{210, 40, 30, 255},
	key(sysClientGo, profShort, "lease"):     color.RGBA{250, 140, 60, 255},
	floorKey(floorLeaseHandoff):              color.RGBA{0, 0, 0, 255},
	floorKey(floorSQLiteHandoff):             color.RGBA{110, 110, 110, 255},
	floorKey(floorPostgresHandoff):           color.RGBA{80, 20, 110, 255},
	floorKey(floorFailover):                  color.RGBA{0, 0, 0, 255},
	floorKey(floorPostgresFailover):          color.RGBA{80, 20, 110, 255},
}

// floorKey is a floor's curve among the sidecar's and client-go's.
func floorKey(latency string) string { return "floor/" + latency }

// withFloors is data and the floors of the given latencies.
func withFloors(data map[string][]trial, r *results, latencies ...string) map[string][]trial {
	out := maps.Clone(data)
	for _, l := range latencies {
		if len(r.Floor[l]) > 0 {
			out[floorKey(l)] = r.Floor[l]
		}
	}
	return out
}

// plots draws the cumulative distributions of hand-off latency and of
// fail-over time beyond the lease duration, and the many-elections costs,
// for the measurements that ran.
func plots(dir string, r *results) error {
	if len(r.Handoff) > 0 {
		if err := cdf("Graceful hand-off: SIGTERM to leader → standby leads", "latency (ms, log scale)",
			filepath.Join(dir, handoffPlot), withFloors(r.Handoff, r, floorLeaseHandoff, floorSQLiteHandoff, floorPostgresHandoff), lat, true); err != nil {
			return err
		}
	}
	if len(r.Failover) > 0 {
		if err := cdf("Crash fail-over: time past (last renewTime + lease duration)", "ms beyond the lease duration",
			filepath.Join(dir, failoverPlot), withFloors(r.Failover, r, floorFailover, floorPostgresFailover), beyond, false); err != nil {
			return err
		}
	}
	if len(r.Elections) > 0 {
		return electionLines(filepath.Join(dir, electionsPlot), r.Elections)
	}
	return nil
}

// cdf plots one curve per key of data: the fraction of trials at or
// below each value of f.
func cdf(title, xlabel, file string, data map[string][]trial, f func(trial) time.Duration, logX bool) error {
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = xlabel
	pl.Y.Label.Text = "fraction of trials ≤ x"
	pl.Legend.Top, pl.Legend.Left = false, true
	if logX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := sorted(data[k], f)
		if len(d) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, 2*len(d))
		for i, v := range d {
			x := float64(v) / float64(time.Millisecond)
			if logX {
				x = math.Max(x, 0.1)
			}
			pts = append(pts, plotter.XY{X: x, Y: float64(i) / float64(len(d))}, plotter.XY{X: x, Y: float64(i+1) / float64(len(d))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = curveColors[k]
		line.Width = vg.Points(2)
		switch {
		case strings.Contains(k, "/short/"):
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		case strings.HasPrefix(k, "floor/"):
			line.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		}
		pl.Add(line)
		pl.Legend.Add(fmt.Sprintf("%s (%d)", strings.ReplaceAll(k, "/", " "), len(d)), line)
	}
	return pl.Save(8*vg.Inch, 4.5*vg.Inch, file)
}
