// Command mutate disables each check of the given Go files in turn and runs the package's tests
// against every such mutant: a check that no test catches is a refusal nobody would miss.
//
// A check is a branch that refuses: an if statement, or a switch case, whose body ends in a
// return of a non-nil error, inside a function whose last result is an error. Disabling it:
//
//   - an if statement's condition c becomes `false && (c)` (its variables stay used);
//   - a case of a switch without a tag likewise, each of its expressions;
//   - a case of a tagged or type switch (or a default) loses its final return, so control
//     falls through past the switch as if the case had not refused; where nothing follows the
//     switch (it ends the function), a case of a tagged switch falls through to the next case
//     instead, and the last case of such a switch returns zero values and a nil error: the
//     check accepts.
//
// With -terms, every operand of a top-level || chain in a condition is also disabled on its own
// (`a || b` becomes `(false && (a)) || b`): a check that refuses for several reasons needs a test
// for each.
//
// Each mutant is compiled through `go test -overlay` (the files on disk are never touched) and
// the tests of the file's package run with -count=1 -vet=off. A mutant is caught when go test
// fails, uncaught when it passes, and "no build" when no way of disabling it compiles (counted
// apart). The tests of the unmodified package must pass first.
//
//	go run ./scripts/mutate [-terms] [-run REGEXP] [-list] [-json] FILE.go...
//
// The output is one line a mutant (CAUGHT with the first failing test, UNCAUGHT, NOBUILD) and a
// summary per file: checks, caught, uncaught. It exits 1 when a mutant is uncaught.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// edit replaces src[start:end] with repl.
type edit struct {
	start, end int
	repl       string
}

// mutant is one check disabled.
type mutant struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Func  string `json:"func"`
	Kind  string `json:"kind"` // "if", "case", "term"
	Check string `json:"check"`
	edits []edit
	// alts disable the check other ways, tried in turn while the mutant does not compile.
	alts [][]edit

	Result string `json:"result"` // "caught", "uncaught", "nobuild"
	By     string `json:"by,omitempty"`
}

func main() {
	terms := flag.Bool("terms", false, "also disable each operand of a condition's top-level || chain")
	run := flag.String("run", "", "run only the tests matching `regexp` (go test -run)")
	list := flag.Bool("list", false, "list the checks; run nothing")
	asJSON := flag.Bool("json", false, "print one JSON object a mutant instead of a line")
	timeout := flag.Duration("timeout", 3*time.Minute, "go test -timeout for each mutant")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: mutate [flags] FILE.go...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	uncaught := 0
	for _, f := range flag.Args() {
		n, err := mutateFile(f, options{terms: *terms, run: *run, list: *list, json: *asJSON, timeout: *timeout})
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(2)
		}
		uncaught += n
	}
	if uncaught > 0 {
		os.Exit(1)
	}
}

type options struct {
	terms, list, json bool
	run               string
	timeout           time.Duration
}

// mutateFile runs every mutant of one file and returns how many no test caught.
func mutateFile(name string, o options) (int, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	src, err := os.ReadFile(abs)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	ms, err := findChecks(abs, src, o.terms)
	if err != nil {
		return 0, err
	}
	rel := name
	if o.list {
		for _, m := range ms {
			fmt.Printf("%s:%d\t%s\t%s\t%s\n", rel, m.Line, m.Func, m.Kind, m.Check)
		}
		fmt.Printf("%s: %d checks\n", rel, len(ms))
		return 0, nil
	}
	modRoot, err := moduleRoot(filepath.Dir(abs))
	if err != nil {
		return 0, err
	}
	pkg := "./" + filepath.ToSlash(mustRel(modRoot, filepath.Dir(abs)))
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return 0, fmt.Errorf("temp dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	if out, ok, err := goTest(modRoot, pkg, "", o); err != nil {
		return 0, err
	} else if !ok {
		return 0, fmt.Errorf("%s: the unmodified package's tests fail:\n%s", pkg, out)
	}
	counts := map[string]int{}
	for i := range ms {
		m := &ms[i]
		out, ok, err := runMutant(tmp, abs, modRoot, pkg, apply(src, m.edits), o)
		for _, alt := range m.alts {
			if err != nil || ok || !buildFailed(out) {
				break
			}
			out, ok, err = runMutant(tmp, abs, modRoot, pkg, apply(src, alt), o)
		}
		if err != nil {
			return 0, err
		}
		switch {
		case ok:
			m.Result = "uncaught"
		case buildFailed(out):
			m.Result = "nobuild"
			m.By = firstLine(out)
		default:
			m.Result = "caught"
			m.By = firstFailure(out)
		}
		counts[m.Result]++
		if o.json {
			b, err := json.Marshal(m)
			if err != nil {
				return 0, fmt.Errorf("json: %w", err)
			}
			fmt.Println(string(b))
		} else {
			fmt.Printf("%-8s %s:%d\t%s\t%s %s\t%s\n", strings.ToUpper(m.Result), rel, m.Line, m.Func, m.Kind, m.Check, m.By)
		}
	}
	summary := fmt.Sprintf("%s: %d checks, %d caught, %d uncaught", rel, len(ms), counts["caught"], counts["uncaught"])
	if counts["nobuild"] > 0 {
		summary += fmt.Sprintf(", %d could not be disabled (no way compiles)", counts["nobuild"])
	}
	fmt.Println(summary)
	return counts["uncaught"], nil
}

// runMutant runs the package's tests with file abs replaced by src.
func runMutant(tmp, abs, modRoot, pkg string, src []byte, o options) (string, bool, error) {
	mfile := filepath.Join(tmp, filepath.Base(abs))
	if err := os.WriteFile(mfile, src, 0o600); err != nil {
		return "", false, fmt.Errorf("write mutant: %w", err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {abs: mfile}})
	if err != nil {
		return "", false, fmt.Errorf("overlay: %w", err)
	}
	ofile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ofile, overlay, 0o600); err != nil {
		return "", false, fmt.Errorf("write overlay: %w", err)
	}
	// A build failure that does not name the mutant (a build cache another go command is
	// trimming, say) is retried.
	for attempt := 1; ; attempt++ {
		out, ok, err := goTest(modRoot, pkg, ofile, o)
		if err != nil || ok || !buildFailed(out) || strings.Contains(out, tmp) || attempt == 3 {
			return out, ok, err
		}
	}
}

// goTest runs the package's tests, with the overlay when one is given. ok reports that they
// passed; err is kept for go test failing to start.
func goTest(dir, pkg, overlay string, o options) (out string, ok bool, err error) {
	args := []string{"test", "-count=1", "-vet=off", "-timeout=" + o.timeout.String()}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	if o.run != "" {
		args = append(args, "-run="+o.run)
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(context.Background(), "go", args...)
	cmd.Dir = dir
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return b.String(), true, nil
	case errors.As(err, &ee):
		return b.String(), false, nil
	}
	return b.String(), false, fmt.Errorf("go test %s: %w", pkg, err)
}

func buildFailed(out string) bool {
	return strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]")
}

var failRE = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// firstFailure names the deepest failing test of go test's output (a subtest is printed before
// its parent), or the first line that says why the run failed.
func firstFailure(out string) string {
	if m := failRE.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "panic:") || strings.Contains(l, "test timed out") {
			return strings.TrimSpace(l)
		}
	}
	return "(go test failed)"
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

func apply(src []byte, edits []edit) []byte {
	// edits never overlap; apply them from the end so earlier offsets stay valid
	out := append([]byte(nil), src...)
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		out = append(out[:e.start:e.start], append([]byte(e.repl), out[e.end:]...)...)
	}
	return out
}

func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

func mustRel(base, target string) string {
	r, err := filepath.Rel(base, target)
	if err != nil {
		return target
	}
	return r
}

// findChecks lists the mutants of one file, in source order.
func findChecks(name string, src []byte, terms bool) ([]mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	c := &collector{fset: fset, src: src, terms: terms, file: filepath.Base(name)}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		c.walk(fd.Body, fd.Type, funcName(fd))
	}
	return c.out, nil
}

type collector struct {
	fset  *token.FileSet
	src   []byte
	terms bool
	file  string
	out   []mutant
}

func (c *collector) off(p token.Pos) int { return c.fset.Position(p).Offset }

func (c *collector) text(n ast.Node) string {
	s := string(c.src[c.off(n.Pos()):c.off(n.End())])
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 90 {
		s = s[:87] + "..."
	}
	return s
}

// disable returns the edit that turns condition e into `false && (e)`.
func (c *collector) disable(e ast.Expr) edit {
	return edit{c.off(e.Pos()), c.off(e.End()), "false && (" + string(c.src[c.off(e.Pos()):c.off(e.End())]) + ")"}
}

func (c *collector) add(pos token.Pos, fn, kind, check string, edits ...edit) *mutant {
	c.out = append(c.out, mutant{File: c.file, Line: c.fset.Position(pos).Line, Func: fn, Kind: kind, Check: check, edits: edits})
	return &c.out[len(c.out)-1]
}

// addTerms adds one mutant per operand of cond's top-level || chain, when it has two or more.
func (c *collector) addTerms(cond ast.Expr, fn string) {
	if !c.terms {
		return
	}
	ops := orOperands(cond)
	if len(ops) < 2 {
		return
	}
	for _, op := range ops {
		c.add(op.Pos(), fn, "term", c.text(op), c.disable(op))
	}
}

func (c *collector) walk(body ast.Node, ft *ast.FuncType, fn string) {
	refuses := returnsError(ft)
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			c.walk(n.Body, n.Type, fn+".func")
			return false
		case *ast.IfStmt:
			if refuses && endsInErrorReturn(n.Body.List) {
				c.add(n.Pos(), fn, "if", "if "+c.text(n.Cond), c.disable(n.Cond))
				c.addTerms(n.Cond, fn)
			}
		case *ast.SwitchStmt:
			if !refuses {
				return true
			}
			for i, s := range n.Body.List {
				cc := s.(*ast.CaseClause)
				if !endsInErrorReturn(cc.Body) {
					continue
				}
				if n.Tag == nil && cc.List != nil {
					var es []edit
					var texts []string
					for _, e := range cc.List {
						es = append(es, c.disable(e))
						texts = append(texts, c.text(e))
					}
					c.add(cc.Pos(), fn, "case", "case "+strings.Join(texts, ", "), es...)
					if len(cc.List) == 1 {
						c.addTerms(cc.List[0], fn)
					}
					continue
				}
				m := c.add(cc.Pos(), fn, "case", caseText(c, cc), c.dropReturn(cc.Body))
				if i < len(n.Body.List)-1 {
					r := cc.Body[len(cc.Body)-1]
					m.alts = append(m.alts, []edit{{c.off(r.Pos()), c.off(r.End()), "fallthrough"}})
				}
				m.alts = append(m.alts, []edit{c.acceptReturn(cc.Body, ft)})
			}
		case *ast.TypeSwitchStmt:
			if !refuses {
				return true
			}
			for _, s := range n.Body.List {
				cc := s.(*ast.CaseClause)
				if endsInErrorReturn(cc.Body) {
					m := c.add(cc.Pos(), fn, "case", caseText(c, cc), c.dropReturn(cc.Body))
					m.alts = append(m.alts, []edit{c.acceptReturn(cc.Body, ft)})
				}
			}
		}
		return true
	})
}

// dropReturn removes a clause's final return statement.
func (c *collector) dropReturn(body []ast.Stmt) edit {
	r := body[len(body)-1]
	return edit{c.off(r.Pos()), c.off(r.End()), ""}
}

// acceptReturn replaces a clause's final return with one of zero values and a nil error.
func (c *collector) acceptReturn(body []ast.Stmt, ft *ast.FuncType) edit {
	var vals []string
	for _, f := range ft.Results.List {
		typ := string(c.src[c.off(f.Type.Pos()):c.off(f.Type.End())])
		for range max(len(f.Names), 1) {
			vals = append(vals, "*new("+typ+")")
		}
	}
	vals[len(vals)-1] = "nil"
	r := body[len(body)-1]
	return edit{c.off(r.Pos()), c.off(r.End()), "return " + strings.Join(vals, ", ")}
}

func caseText(c *collector, cc *ast.CaseClause) string {
	if cc.List == nil {
		return "default"
	}
	var texts []string
	for _, e := range cc.List {
		texts = append(texts, c.text(e))
	}
	return "case " + strings.Join(texts, ", ")
}

// orOperands flattens a top-level || chain (through parentheses).
func orOperands(e ast.Expr) []ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			break
		}
		e = p.X
	}
	b, ok := e.(*ast.BinaryExpr)
	if !ok || b.Op != token.LOR {
		return []ast.Expr{e}
	}
	return append(orOperands(b.X), orOperands(b.Y)...)
}

// returnsError reports whether a function's last result is of type error.
func returnsError(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) == 0 {
		return false
	}
	id, ok := ft.Results.List[len(ft.Results.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}

// endsInErrorReturn reports whether a block ends in a return whose last value is not nil.
func endsInErrorReturn(stmts []ast.Stmt) bool {
	if len(stmts) == 0 {
		return false
	}
	r, ok := stmts[len(stmts)-1].(*ast.ReturnStmt)
	if !ok || len(r.Results) == 0 {
		return false
	}
	id, ok := r.Results[len(r.Results)-1].(*ast.Ident)
	return !ok || id.Name != "nil"
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
