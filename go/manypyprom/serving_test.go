package manypyprom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"manypy.dev/manypy"
)

// series flattens metric families into one line per sample,
// name{sorted labels} -> value, histograms as their _bucket, _sum and
// _count samples, and each family's type and help: what two expositions
// must share to be the same.
func series(families []*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, f := range families {
		out["# TYPE "+f.GetName()+" "+f.GetType().String()+" # HELP "+f.GetHelp()] = 1
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := func(suffix string, extra ...string) string {
				all := append(append([]string(nil), labels...), extra...)
				sort.Strings(all)
				return f.GetName() + suffix + "{" + strings.Join(all, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key("")] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key("")] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					out[key("_bucket", fmt.Sprintf("le=%q", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				out[key("_bucket", `le="+Inf"`)] = float64(h.GetSampleCount())
				out[key("_sum")] = h.GetSampleSum()
				out[key("_count")] = float64(h.GetSampleCount())
			default:
				out[key("")+" unexpected type "+f.GetType().String()] = 1
			}
		}
	}
	return out
}

// The collector's series are the C library's text's, sample for sample:
// names, types, help, labels (the pool's name, models, codes such as "ok",
// "python", "deadline_exceeded" and "draining", interpreter states, the
// buckets' bounds) and values, for a named pool and an unnamed one.
func TestServingCollectorMatchesTheCText(t *testing.T) {
	for _, name := range []string{`svc "a"`, ""} {
		t.Run(fmt.Sprintf("pool %q", name), func(t *testing.T) {
			pool, err := manypy.NewPool(manypy.PoolOptions{Interpreters: 2, Name: name})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			exec := func(model string, timeout time.Duration, source string) error {
				ctx := manypy.WithCallOptions(context.Background(), manypy.CallOptions{ModelID: model})
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				return pool.ExecContext(ctx, source)
			}
			for i := 0; i < 3; i++ {
				if err := exec("m1", 0, "x = 1"); err != nil {
					t.Fatal(err)
				}
			}
			if err := exec("m1", 0, "1 / 0"); !errors.Is(err, manypy.ErrPython) {
				t.Fatalf("1 / 0: %v", err)
			}
			if err := exec("m2", 50*time.Millisecond, "while True:\n    pass"); !errors.Is(err, manypy.ErrDeadlineExceeded) {
				t.Fatalf("a call past its deadline: %v", err)
			}
			if err := exec("", 0, "y = 2"); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := exec("m2", 0, "x = 1"); !errors.Is(err, manypy.ErrDraining) {
				t.Fatalf("a call after the drain: %v", err)
			}

			text, err := pool.PrometheusText()
			if err != nil {
				t.Fatal(err)
			}
			parser := expfmt.NewTextParser(model.LegacyValidation)
			fromC, err := parser.TextToMetricFamilies(strings.NewReader(text))
			if err != nil {
				t.Fatalf("the C text does not parse: %v\n%s", err, text)
			}
			var cFamilies []*dto.MetricFamily
			for _, f := range fromC {
				cFamilies = append(cFamilies, f)
			}
			registry := prometheus.NewPedanticRegistry()
			registry.MustRegister(NewServingCollector(pool))
			fromGo, err := registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			want, got := series(cFamilies), series(fromGo)
			for k, v := range want {
				g, ok := got[k]
				if !ok {
					t.Errorf("the collector lacks %s", k)
				} else if math.Abs(g-v) > 1e-6*math.Max(1, math.Abs(v)) {
					t.Errorf("%s: collector %v, C %v", k, g, v)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("the C text lacks %s", k)
				}
			}
			// What the test is about is there at all.
			sample := func(metric string, labels ...string) string {
				if name != "" {
					labels = append(labels, fmt.Sprintf("pool=%q", name))
				}
				sort.Strings(labels)
				return metric + "{" + strings.Join(labels, ",") + "}"
			}
			for k, v := range map[string]float64{
				sample("manypy_requests_total", `code="ok"`, `model="m1"`):                3,
				sample("manypy_requests_total", `code="python"`, `model="m1"`):            1,
				sample("manypy_requests_total", `code="deadline_exceeded"`, `model="m2"`): 1,
				sample("manypy_requests_total", `code="draining"`, `model="m2"`):          1,
				sample("manypy_requests_total", `code="ok"`, `model=""`):                  1,
				sample("manypy_request_duration_seconds_count", `model="m1"`):             4,
				sample("manypy_queue_duration_seconds_bucket", `le="10"`, `model="m2"`):   1,
				sample("manypy_interpreters", `state="ready"`):                            2,
				sample("manypy_interpreters", `state="broken"`):                           0,
				sample("manypy_interpreters", `state="lost"`):                             0,
				sample("manypy_inflight_requests"):                                        0,
				sample("manypy_draining"):                                                 1,
			} {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s: %v (present: %v), want %v; the series: %v", k, g, ok, v, keys(got))
				}
			}
		})
	}
}

func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The serving collector and the older PoolCollector on one pedantic
// registry: no name is registered twice; a closed pool makes the serving
// collector's scrape fail, not panic.
func TestServingCollectorBesidePoolCollector(t *testing.T) {
	pool, err := manypy.NewPool(manypy.PoolOptions{Name: "both"})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(NewServingCollector(pool), NewPoolCollector(pool, "both"))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, f := range families {
		names[f.GetName()]++
	}
	for _, name := range []string{"manypy_inflight_requests", "manypy_queued_requests", "manypy_interpreters",
		"manypy_draining", "manypy_pool_queued_calls", "manypy_pool_in_flight_calls"} {
		if names[name] != 1 {
			t.Errorf("%s: %d families", name, names[name])
		}
	}
	pool.Close()
	if _, err := registry.Gather(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("scrape of a closed pool: %v", err)
	}
}

func TestCodeLabel(t *testing.T) {
	for code, want := range map[manypy.Code]string{
		manypy.CodeOK: "ok", manypy.CodePython: "python", manypy.CodeDeadlineExceeded: "deadline_exceeded",
		manypy.CodeDraining: "draining", manypy.CodeOverloaded: "overloaded", 31: "unknown",
	} {
		if got := CodeLabel(code); got != want {
			t.Errorf("%v: %q, want %q", code, got, want)
		}
	}
}
