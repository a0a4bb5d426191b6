package prom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unique"

	jsoniter "github.com/json-iterator/go"
)

// QueryStat is one query the reader made, as Options.QueryLog receives
// it (`gpuaffinity fleet --log-queries` prints it): the PromQL, the
// evaluation time, how long the answer took to arrive and be decoded,
// its size after decompression, the series it held and the HTTP status.
type QueryStat struct {
	Query   string    `json:"query"`
	Time    time.Time `json:"time"`
	Seconds float64   `json:"seconds"`
	Bytes   int64     `json:"bytes"`
	Series  int       `json:"series"`
	Status  int       `json:"status"`
}

// ErrTooLarge is wrapped when an answer is larger than
// Options.MaxResponseBytes.
var ErrTooLarge = errors.New("response over the bound on a response's size")

// label is one label of a series.
type label struct{ name, value string }

// series is one element of a query's result: its labels, and its value
// and timestamp (for a range vector, the last ones).
type series struct {
	labels []label
	value  float64
	t      float64
}

// get returns the value of label name, "" where the series has none.
func (s *series) get(name string) string {
	for _, l := range s.labels {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

// query evaluates q at the reader's time through POST /api/v1/query
// and calls visit for each series of the result as it is decoded, never
// holding the whole answer: the series' label slice is reused between
// calls, its strings are not. The body is read up to the bound on a
// response's size (decompressed: a gzip bomb stops there too).
func (r *reader) query(ctx context.Context, q string, visit func(*series) error) error {
	start := time.Now()
	stat := QueryStat{Query: q, Time: r.o.Time}
	err := r.do(ctx, q, &stat, visit)
	stat.Seconds = time.Since(start).Seconds()
	if r.o.QueryLog != nil {
		r.mu.Lock()
		r.o.QueryLog(stat)
		r.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("prometheus %s: query %s: %w", r.server, clip(q, 200), err)
	}
	return nil
}

func (r *reader) do(ctx context.Context, q string, stat *QueryStat, visit func(*series) error) error {
	form := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(r.o.Time.UnixMilli())/1000, 'f', 3, 64)}}
	if dl, ok := ctx.Deadline(); ok {
		// Prometheus stops evaluating when the caller has given up.
		form.Set("timeout", strconv.Itoa(max(1, int(math.Ceil(time.Until(dl).Seconds()))))+"s")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/api/v1/query", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	stat.Status = resp.StatusCode
	body := &boundedReader{r: resp.Body, max: r.o.MaxResponseBytes}
	defer func() { stat.Bytes = body.n }()
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/json") {
		head, _ := io.ReadAll(io.LimitReader(body, 512))
		return fmt.Errorf("HTTP %s, %s: %s", resp.Status, quoted(ct), quoted(string(head)))
	}
	d := decoder{visit: visit}
	d.decode(body)
	stat.Series = d.series
	switch {
	case body.err != nil:
		return body.err
	case d.err != nil:
		return d.err
	case d.status != "success":
		return fmt.Errorf("HTTP %s: %s: %s", resp.Status, quoted(d.errorType), quoted(d.errorText))
	case d.resultType != "vector" && d.resultType != "matrix":
		return fmt.Errorf("result of type %s, want a vector", quoted(d.resultType))
	}
	for _, w := range d.warnings {
		r.warn("prometheus %s: query %s: %s", r.server, clip(q, 200), quoted(w))
	}
	return nil
}

// boundedReader reads r to max bytes and fails with ErrTooLarge past it.
type boundedReader struct {
	r   io.Reader
	n   int64
	max int64
	err error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if left := b.max - b.n + 1; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.err = fmt.Errorf("%w: more than %s (--max-response)", ErrTooLarge, byteSize(b.max))
		return n - int(b.n-b.max), b.err
	}
	return n, err
}

// byteSize is n in MiB where it is a whole number of them, else bytes.
func byteSize(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// decoder walks an /api/v1/query answer token by token:
//
//	{"status":"success","data":{"resultType":"vector","result":[
//	  {"metric":{"job":"a",...},"value":[1733.1,"1"]},...]},"warnings":[...]}
//
// and, for a range vector, "values":[[t,"v"],...] in place of "value".
type decoder struct {
	visit      func(*series) error
	status     string
	errorType  string
	errorText  string
	resultType string
	warnings   []string
	series     int
	err        error // visit's, or a malformed answer
	cur        series
}

// maxWarnings bounds the warnings kept from one answer.
const maxWarnings = 16

func (d *decoder) decode(body io.Reader) {
	it := jsoniter.Parse(jsoniter.ConfigDefault, body, 64<<10)
	it.ReadObjectCB(func(it *jsoniter.Iterator, field string) bool {
		switch field {
		case "status":
			d.status = it.ReadString()
		case "errorType":
			d.errorType = it.ReadString()
		case "error":
			d.errorText = it.ReadString()
		case "warnings", "infos":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				w := it.ReadString()
				if len(d.warnings) < maxWarnings {
					d.warnings = append(d.warnings, w)
				}
				return true
			})
		case "data":
			it.ReadObjectCB(d.data)
		default:
			it.Skip()
		}
		return it.Error == nil && d.err == nil
	})
	if d.err == nil && it.Error != nil && it.Error != io.EOF {
		d.err = fmt.Errorf("malformed answer: %s", quoted(it.Error.Error()))
	}
}

func (d *decoder) data(it *jsoniter.Iterator, field string) bool {
	switch field {
	case "resultType":
		d.resultType = it.ReadString()
	case "result":
		if it.WhatIsNext() != jsoniter.ArrayValue {
			d.err = errors.New("malformed answer: result is not a list")
			return false
		}
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			d.cur = series{labels: d.cur.labels[:0], value: math.NaN(), t: math.Inf(-1)}
			it.ReadObjectCB(d.element)
			if it.Error != nil || d.err != nil {
				return false
			}
			d.series++
			if err := d.visit(&d.cur); err != nil {
				d.err = err
				return false
			}
			return true
		})
	default:
		it.Skip()
	}
	return it.Error == nil && d.err == nil
}

func (d *decoder) element(it *jsoniter.Iterator, field string) bool {
	switch field {
	case "metric":
		it.ReadMapCB(func(it *jsoniter.Iterator, name string) bool {
			d.cur.labels = append(d.cur.labels, label{name: intern(name), value: it.ReadString()})
			return true
		})
	case "value":
		d.point(it)
	case "values":
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool { d.point(it); return it.Error == nil })
	default:
		it.Skip()
	}
	return it.Error == nil
}

// point reads [t, "v"], keeping the latest.
func (d *decoder) point(it *jsoniter.Iterator) {
	var t float64
	var v string
	i := 0
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		switch i {
		case 0:
			t = it.ReadFloat64()
		case 1:
			v = it.ReadString()
		default:
			it.Skip()
		}
		i++
		return it.Error == nil
	})
	if t >= d.cur.t {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f = math.NaN()
		}
		d.cur.t, d.cur.value = t, f
	}
}

// intern returns s's canonical copy: label names, and values many nodes
// share (models, clouds, switches), are held once.
func intern(s string) string { return unique.Make(s).Value() }

// quoted is s for a message: quoted, so that no byte of a server's
// answer can start a line of its own or move the terminal, and clipped.
func quoted(s string) string { return strconv.Quote(clip(s, 256)) }

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
