package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The dashboard's JSON model, as far as gpuaffinity.json uses it: the
// fields are Grafana's (https://grafana.com/docs/grafana/latest/dashboards/build-dashboards/view-dashboard-json-model/),
// and load decodes strictly, so a field not listed here fails the test
// until it is added (and checked) here.
type dashboard struct {
	Annotations          struct{ List []struct{} } `json:"annotations"`
	Description          string                    `json:"description"`
	Editable             bool                      `json:"editable"`
	FiscalYearStartMonth int                       `json:"fiscalYearStartMonth"`
	GraphTooltip         int                       `json:"graphTooltip"`
	ID                   *int                      `json:"id"`
	Links                []struct{}                `json:"links"`
	Panels               []panel                   `json:"panels"`
	Refresh              string                    `json:"refresh"`
	SchemaVersion        int                       `json:"schemaVersion"`
	Tags                 []string                  `json:"tags"`
	Templating           struct{ List []variable } `json:"templating"`
	Time                 struct{ From, To string } `json:"time"`
	Timepicker           struct{}                  `json:"timepicker"`
	Timezone             string                    `json:"timezone"`
	Title                string                    `json:"title"`
	UID                  string                    `json:"uid"`
	Version              int                       `json:"version"`
	WeekStart            string                    `json:"weekStart"`
}

type variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Query      string         `json:"query"`
	Definition string         `json:"definition"`
	Datasource *datasourceRef `json:"datasource"`
	Current    struct{}       `json:"current"`
	Hide       int            `json:"hide"`
	IncludeAll bool           `json:"includeAll"`
	Multi      bool           `json:"multi"`
	Options    []struct{}     `json:"options"`
	Refresh    int            `json:"refresh"`
	Regex      string         `json:"regex"`
	Sort       int            `json:"sort"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type panel struct {
	ID              int              `json:"id"`
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	Description     string           `json:"description"`
	Collapsed       *bool            `json:"collapsed"`
	GridPos         gridPos          `json:"gridPos"`
	Datasource      *datasourceRef   `json:"datasource"`
	FieldConfig     *fieldConfig     `json:"fieldConfig"`
	Options         *panelOptions    `json:"options"`
	Targets         []target         `json:"targets"`
	Transformations []transformation `json:"transformations"`
	Panels          []panel          `json:"panels"` // a row's, when it is collapsed
}

type target struct {
	Datasource   *datasourceRef `json:"datasource"`
	EditorMode   string         `json:"editorMode"`
	Expr         string         `json:"expr"`
	Format       string         `json:"format"`
	Instant      bool           `json:"instant"`
	Range        bool           `json:"range"`
	LegendFormat string         `json:"legendFormat"`
	RefID        string         `json:"refId"`
}

type fieldConfig struct {
	Defaults struct {
		Color      *struct{ Mode string } `json:"color"`
		Unit       string                 `json:"unit"`
		Min        *float64               `json:"min"`
		Max        *float64               `json:"max"`
		Decimals   *int                   `json:"decimals"`
		Mappings   []valueMapping         `json:"mappings"`
		Thresholds *thresholds            `json:"thresholds"`
		Custom     *struct {
			DrawStyle   string `json:"drawStyle"`
			FillOpacity *int   `json:"fillOpacity"`
			LineWidth   *int   `json:"lineWidth"`
			ShowPoints  string `json:"showPoints"`
			SpanNulls   *bool  `json:"spanNulls"`
		} `json:"custom"`
	} `json:"defaults"`
	Overrides []struct {
		Matcher struct {
			ID      string `json:"id"`
			Options string `json:"options"`
		} `json:"matcher"`
		Properties []struct {
			ID    string          `json:"id"`
			Value json.RawMessage `json:"value"` // decoded by property id in checkOverrides
		} `json:"properties"`
	} `json:"overrides"`
}

// valueMapping is a mapping of type "value": options maps a value, as
// text, to what is shown.
type valueMapping struct {
	Type    string `json:"type"`
	Options map[string]struct {
		Text  string `json:"text"`
		Color string `json:"color"`
		Index int    `json:"index"`
	} `json:"options"`
}

type thresholds struct {
	Mode  string `json:"mode"`
	Steps []struct {
		Color string   `json:"color"`
		Value *float64 `json:"value"`
	} `json:"steps"`
}

// panelOptions holds the options of every panel type the dashboard uses.
type panelOptions struct {
	// stat, bargauge
	ReduceOptions *struct {
		Calcs  []string `json:"calcs"`
		Fields string   `json:"fields"`
		Values bool     `json:"values"`
	} `json:"reduceOptions"`
	ColorMode    string `json:"colorMode"`
	GraphMode    string `json:"graphMode"`
	JustifyMode  string `json:"justifyMode"`
	Orientation  string `json:"orientation"`
	TextMode     string `json:"textMode"`
	DisplayMode  string `json:"displayMode"`
	ShowUnfilled *bool  `json:"showUnfilled"`
	ValueMode    string `json:"valueMode"`
	// timeseries, state-timeline
	Legend *struct {
		Calcs       []string `json:"calcs"`
		DisplayMode string   `json:"displayMode"`
		Placement   string   `json:"placement"`
		ShowLegend  bool     `json:"showLegend"`
	} `json:"legend"`
	Tooltip *struct {
		Mode string `json:"mode"`
		Sort string `json:"sort"`
	} `json:"tooltip"`
	AlignValue  string   `json:"alignValue"`
	MergeValues *bool    `json:"mergeValues"`
	RowHeight   *float64 `json:"rowHeight"`
	ShowValue   string   `json:"showValue"`
	// table
	CellHeight string `json:"cellHeight"`
	ShowHeader *bool  `json:"showHeader"`
	SortBy     []struct {
		DisplayName string `json:"displayName"`
		Desc        bool   `json:"desc"`
	} `json:"sortBy"`
}

type transformation struct {
	ID      string `json:"id"`
	Options struct {
		ExcludeByName map[string]bool   `json:"excludeByName"`
		RenameByName  map[string]string `json:"renameByName"`
		IndexByName   map[string]int    `json:"indexByName"`
	} `json:"options"`
}

const dashboardFile = "gpuaffinity.json"

// dsVar is the datasource reference of every panel and target: the
// dashboard's datasource variable, never a data source's own uid.
var dsVar = datasourceRef{Type: "prometheus", UID: "${datasource}"}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

func load(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := decodeStrict(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// queryPanels returns every panel that is not a row, rows' nested panels
// included, in order.
func queryPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, queryPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// panelTypes are the panel types the dashboard uses, Grafana's built-in
// ones, and whether their targets are instant queries.
var panelTypes = map[string]bool{"stat": true, "bargauge": true, "table": true, "timeseries": false, "state-timeline": false}

// grafanaGlobals are the built-in variables the queries may use
// (https://grafana.com/docs/grafana/latest/dashboards/variables/add-template-variables/#global-variables).
var grafanaGlobals = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

// varRef matches $name and ${name} (or ${name:format}); $1 in a
// label_replace is no variable (names start with a letter or _).
var varRef = regexp.MustCompile(`\$(?:\{([A-Za-z_]\w*)(?::[^}]*)?\}|([A-Za-z_]\w*))`)

// substitute replaces the variables of expr by vals and fails on one
// vals does not hold.
func substitute(expr string, vals map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		sm := varRef.FindStringSubmatch(m)
		name := sm[1] + sm[2]
		v, ok := vals[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if missing != nil {
		return "", fmt.Errorf("%s: unknown variables %q", expr, missing)
	}
	return out, nil
}

// selector is one vector selector of a query: a metric name and its
// label matchers (the text between the braces).
type selector struct{ name, matchers string }

// promqlKeywords are PromQL's words that are neither functions nor
// metric names (https://prometheus.io/docs/prometheus/latest/querying/operators/).
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "Inf": true, "NaN": true}

// groupingKeywords are followed by a parenthesised list of label names.
var groupingKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// selectors lists the vector selectors of a PromQL expression. It is a
// lexer, not a parser (Prometheus parses the queries in the Prometheus
// test): it skips strings, durations in brackets and the label lists of
// by/on/group_left, and reports a metric name that has no braces, since
// the dashboard writes every selector as name{job="$job", instance="$instance"}.
func selectors(expr string) ([]selector, error) {
	var out []selector
	depth := 0
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	// closing returns the index after the bracket that closes the one at i,
	// skipping strings.
	closing := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(expr, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%q: unclosed %c at %d", expr, open, i)
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := closing(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			return nil, fmt.Errorf("%q: a selector without a metric name at %d", expr, i)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++ // a number (1e3, 0x1f) or a duration
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := skipSpace(j)
			switch {
			case k < len(expr) && expr[k] == '{':
				end, err := closing(k, '{', '}')
				if err != nil {
					return nil, err
				}
				out = append(out, selector{name: word, matchers: expr[k+1 : end-1]})
				i = end
			case groupingKeywords[word]:
				if k >= len(expr) || expr[k] != '(' {
					return nil, fmt.Errorf("%q: %s without a label list", expr, word)
				}
				end, err := closing(k, '(', ')')
				if err != nil {
					return nil, err
				}
				i = end
			case k < len(expr) && expr[k] == '(' || promqlKeywords[word] || aggregationBy(expr[k:]):
				i = j // a function or aggregation, or an operator word
			default:
				return nil, fmt.Errorf("%q: metric name %s without a selector: write %s{job=\"$job\", instance=\"$instance\"}", expr, word, word)
			}
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("%q: unopened ) at %d", expr, i)
			}
			i++
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: unclosed (", expr)
	}
	return out, nil
}

// aggregationBy reports whether rest starts with by or without and a
// label list: what follows an aggregation's name in "sum by (gpu) (...)".
func aggregationBy(rest string) bool {
	for _, kw := range []string{"by", "without"} {
		if after, ok := strings.CutPrefix(rest, kw); ok && strings.HasPrefix(strings.TrimLeft(after, " "), "(") {
			return true
		}
	}
	return false
}

// skipString returns the index after the string literal starting at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%q: unterminated string at %d", s, i)
}

// nodeMatchers are the matchers every selector must carry, so each panel
// shows the one node the variables choose; fleetMatchers those of the
// Fleet row's panels, which show every node of the job.
var (
	nodeMatchers  = []string{`job="$job"`, `instance="$instance"`}
	fleetMatchers = []string{`job="$job"`}
)

// fleetRow is the row whose panels show the whole job, not one node.
const fleetRow = "Fleet"

// hasMatchers reports whether matchers holds each of want and no other
// matcher on a label of want's (so a fleet selector cannot also pick an
// instance, nor a node selector match a second job).
func hasMatchers(matchers string, want []string) bool {
	have := map[string]bool{}
	labels := map[string]int{}
	for _, m := range strings.Split(matchers, ",") {
		m = strings.Join(strings.Fields(m), "")
		if m == "" {
			continue
		}
		have[m] = true
		labels[m[:strings.IndexAny(m+"=", "=!~")]]++
	}
	for _, m := range want {
		if !have[m] {
			return false
		}
	}
	for _, l := range []string{"job", "instance"} {
		n := 0
		for _, m := range want {
			if strings.HasPrefix(m, l+"=") {
				n++
			}
		}
		if labels[l] != n {
			return false
		}
	}
	return true
}

// fleetPanels returns the titles of the panels of the Fleet row: those
// after it and before the next row.
func fleetPanels(ps []panel) map[string]bool {
	out := map[string]bool{}
	in := false
	for _, p := range ps {
		if p.Type == "row" {
			in = p.Title == fleetRow
			continue
		}
		if in {
			out[p.Title] = true
		}
	}
	return out
}

// The dashboard's structure: decoded strictly; a Prometheus datasource
// variable and no data source uid anywhere else; job and node variables
// from label_values; every panel titled (uniquely), on the grid without
// overlaps, with the datasource variable and at least one target; every
// query's selectors filtered by job and node (by job alone in the Fleet
// row) and its variables defined.
func TestDashboard(t *testing.T) {
	d := load(t)
	// 39 is DASHBOARD_SCHEMA_VERSION in Grafana 10's
	// public/app/features/dashboard/state/DashboardMigrator.ts; later
	// Grafanas migrate it forward when they load the dashboard.
	if d.SchemaVersion != 39 || d.UID == "" || d.Title == "" || d.ID != nil {
		t.Errorf("schemaVersion %d, uid %q, title %q, id %v; want 39, a uid, a title and id null (so an import creates it)",
			d.SchemaVersion, d.UID, d.Title, d.ID)
	}
	if !strings.HasPrefix(d.Time.From, "now-") || d.Time.To != "now" {
		t.Errorf("time %+v, want a relative range ending now", d.Time)
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds := vars["datasource"]; ds.Type != "datasource" || ds.Query != "prometheus" || ds.Datasource != nil {
		t.Errorf("variable datasource = %+v, want type datasource over prometheus data sources", ds)
	}
	for _, name := range []string{"job", "instance"} {
		v := vars[name]
		if v.Type != "query" || v.Datasource == nil || *v.Datasource != dsVar || !labelValuesRE.MatchString(v.Query) ||
			v.Definition != v.Query || v.IncludeAll || v.Multi {
			t.Errorf("variable %s = %+v, want a single-valued label_values query on ${datasource}", name, v)
		}
	}
	if len(vars) != 3 || len(d.Templating.List) != 3 {
		t.Errorf("variables %v, want datasource, job and instance, once each", d.Templating.List)
	}
	defined := map[string]string{}
	for name := range vars {
		defined[name] = ""
	}
	for name := range grafanaGlobals {
		defined[name] = ""
	}

	// Rows sit on the grid with the other panels when they are open.
	var grid []panel
	for _, p := range d.Panels {
		grid = append(grid, p)
		if p.Type == "row" {
			if p.Collapsed == nil || *p.Collapsed || len(p.Panels) != 0 || p.Datasource != nil || p.Targets != nil || p.GridPos.W != 24 || p.GridPos.H != 1 {
				t.Errorf("row %q: %+v; want an open row, 24 wide and 1 high, its panels after it", p.Title, p)
			}
		}
	}
	checkGrid(t, grid)

	ids, titles := map[int]bool{}, map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || titles[p.Title] {
			t.Errorf("panel %d %q: id or title used twice", p.ID, p.Title)
		}
		ids[p.ID], titles[p.Title] = true, true
	}
	ps := queryPanels(d.Panels)
	if len(ps) < 40 {
		t.Errorf("%d panels, want at least 40 (the rows README.md describes)", len(ps))
	}
	fleet := fleetPanels(d.Panels)
	if len(fleet) == 0 {
		t.Errorf("no row %q with panels", fleetRow)
	}
	for _, p := range ps {
		want := nodeMatchers
		if fleet[p.Title] {
			want = fleetMatchers
		}
		instant, known := panelTypes[p.Type]
		if !known {
			t.Errorf("panel %q: type %q not one of %v", p.Title, p.Type, panelTypes)
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q; want both", p.ID, p.Title, p.Description)
		}
		if p.Datasource == nil || *p.Datasource != dsVar {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, dsVar)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no target", p.Title)
		}
		if p.FieldConfig == nil || p.Options == nil {
			t.Errorf("panel %q: no fieldConfig or options", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || *tg.Datasource != dsVar {
				t.Errorf("panel %q target %s: datasource %+v, want %+v", p.Title, tg.RefID, tg.Datasource, dsVar)
			}
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q empty or used twice", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Instant != instant || tg.Range == instant {
				t.Errorf("panel %q target %s: instant %t range %t; a %s panel wants instant %t", p.Title, tg.RefID, tg.Instant, tg.Range, p.Type, instant)
			}
			if want := map[bool]string{true: "table", false: "time_series"}[p.Type == "table"]; tg.Format != want {
				t.Errorf("panel %q target %s: format %q, want %q", p.Title, tg.RefID, tg.Format, want)
			}
			if _, err := substitute(tg.Expr, defined); err != nil {
				t.Errorf("panel %q target %s: %v", p.Title, tg.RefID, err)
			}
			sels, err := selectors(tg.Expr)
			if err != nil {
				t.Errorf("panel %q target %s: %v", p.Title, tg.RefID, err)
			}
			if len(sels) == 0 && err == nil {
				t.Errorf("panel %q target %s: %s reads no series", p.Title, tg.RefID, tg.Expr)
			}
			for _, s := range sels {
				if !hasMatchers(s.matchers, want) {
					t.Errorf("panel %q target %s: %s{%s}: want %v and no other job or instance matcher", p.Title, tg.RefID, s.name, s.matchers, want)
				}
			}
			if fleet[p.Title] && strings.Contains(tg.Expr, "$instance") {
				t.Errorf("panel %q target %s: a Fleet panel uses $instance: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
		checkOverrides(t, p)
	}
}

var labelValuesRE = regexp.MustCompile(`^label_values\((?:(.+),\s*)?([A-Za-z_]\w*)\)$`)

// checkGrid holds the panels to Grafana's 24-column grid, without overlaps.
func checkGrid(t *testing.T, ps []panel) {
	t.Helper()
	for i, p := range ps {
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for _, q := range ps[:i] {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", q.Title, h, p.Title, g)
			}
		}
	}
}

// checkOverrides decodes each field override's value strictly by its
// property id and, in tables, holds the field it names to a column the
// organize transformation names.
func checkOverrides(t *testing.T, p panel) {
	t.Helper()
	columns := map[string]bool{}
	for _, tr := range p.Transformations {
		switch tr.ID {
		case "merge":
		case "organize":
			for _, to := range tr.Options.RenameByName {
				columns[to] = true
			}
		default:
			t.Errorf("panel %q: transformation %q not checked here", p.Title, tr.ID)
		}
	}
	if p.FieldConfig == nil {
		return
	}
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byName" || p.Type == "table" && !columns[o.Matcher.Options] {
			t.Errorf("panel %q: override of %s %q, want byName of a column of %v", p.Title, o.Matcher.ID, o.Matcher.Options, columns)
		}
		for _, prop := range o.Properties {
			var err error
			switch prop.ID {
			case "mappings":
				var m []valueMapping
				err = decodeStrict(prop.Value, &m)
			case "unit":
				var s string
				err = decodeStrict(prop.Value, &s)
			case "decimals":
				var n int
				err = decodeStrict(prop.Value, &n)
			case "custom.cellOptions":
				var c struct {
					Type string `json:"type"`
				}
				err = decodeStrict(prop.Value, &c)
			default:
				err = fmt.Errorf("property not checked here")
			}
			if err != nil {
				t.Errorf("panel %q: override %q property %s: %v", p.Title, o.Matcher.Options, prop.ID, err)
			}
		}
	}
}

// The lexer finds the selectors of the kinds of query the dashboard
// writes and refuses a bare metric name and a nameless selector.
func TestSelectors(t *testing.T) {
	for expr, want := range map[string][]selector{
		`sum by (gpu) (rate(a_total{job="$job"}[$__rate_interval]))`:                {{"a_total", `job="$job"`}},
		`count(x{l="}"} == 0) or on() (0 * count(y{m=~"a|b"}))`:                     {{"x", `l="}"`}, {"y", `m=~"a|b"`}},
		`a{} - on(job, instance, gpu) group_left(uuid) sum by (gpu) (b{ c = "d" })`: {{"a", ""}, {"b", ` c = "d" `}},
		`time() - t{}`: {{"t", ""}},
		`label_replace(r{}, "nic", "$1", "d", "(.*)")`: {{"r", ""}},
		`u{} * 8 + 1e3`: {{"u", ""}},
	} {
		got, err := selectors(expr)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("selectors(%s) = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, expr := range []string{`sum(up)`, `{__name__="up"}`, `rate(a{}[5m]`, `a{b="c}`} {
		if got, err := selectors(expr); err == nil {
			t.Errorf("selectors(%s) = %v, want an error", expr, got)
		}
	}
}

// hasMatchers wants the job (and instance) matchers and refuses a second
// matcher on either label.
func TestHasMatchers(t *testing.T) {
	for _, c := range []struct {
		matchers string
		want     []string
		ok       bool
	}{
		{`job="$job", instance="$instance"`, nodeMatchers, true},
		{` instance = "$instance" ,job="$job", gpu="2"`, nodeMatchers, true},
		{`job="$job"`, nodeMatchers, false},
		{`job="$job"`, fleetMatchers, true},
		{`job="$job", clique!=""`, fleetMatchers, true},
		{`job="$job", instance="$instance"`, fleetMatchers, false},
		{`job="$job", instance=~".+"`, fleetMatchers, false},
		{`job="$job", job!="x", instance="$instance"`, nodeMatchers, false},
	} {
		if got := hasMatchers(c.matchers, c.want); got != c.ok {
			t.Errorf("hasMatchers(%s, %v) = %t, want %t", c.matchers, c.want, got, c.ok)
		}
	}
}
