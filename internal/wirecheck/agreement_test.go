package wirecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The three statements of the protocol's vocabulary must agree: the
// method and error-code lists of docs/protocol.md (its headings and §5
// tables), of docs/protocol.schema.json (x-methods, $defs ErrorCode and
// DataCode) and of package protocol's constants (Method*/Notify*/
// RequestPermission, Code*, Err*). Adding a method or a code to one of
// them without the others fails here.

var (
	methodToken = regexp.MustCompile("`(\\$/[A-Za-z_]+|[a-z]+/[A-Za-z]+|initialize|shutdown|exit)`")
	codeToken   = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
)

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	return filepath.Join(filepath.Dir(Path()), "..", rel)
}

// docVocabulary parses docs/protocol.md: methods from "###" headings,
// numeric codes and data codes from the tables of §5, proof error codes
// from the sentence naming them.
func docVocabulary(t *testing.T) (methods, numeric, data, proofCodes map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "docs/protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	methods, numeric, data, proofCodes = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	section, table := "", ""
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "## "):
			section, table = line, ""
		case strings.HasPrefix(line, "### "):
			for _, m := range methodToken.FindAllStringSubmatch(line, -1) {
				methods[m[1]] = true
			}
		case strings.HasPrefix(line, "|") && strings.HasPrefix(section, "## 5."):
			cells := strings.Split(strings.Trim(line, "| "), "|")
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			if i > 0 && !strings.HasPrefix(lines[i-1], "|") {
				table = cells[0] // the header row names the table
				continue
			}
			if strings.HasPrefix(cells[0], "---") {
				continue
			}
			switch table {
			case "code": // numeric code | data.code | when
				numeric[cells[0]] = true
				for _, m := range codeToken.FindAllStringSubmatch(cells[1], -1) {
					data[m[1]] = true
				}
			case "`data.code`": // data code(s) | retryable | raised by
				for _, m := range codeToken.FindAllStringSubmatch(cells[0], -1) {
					data[m[1]] = true
				}
			}
		case strings.HasPrefix(section, "## 5.") && strings.Contains(line, "A proof's `errors` use their own codes"):
			text := line
			for k := i + 1; k < len(lines) && strings.TrimSpace(lines[k]) != ""; k++ {
				text += " " + lines[k]
			}
			for _, m := range codeToken.FindAllStringSubmatch(text, -1) {
				proofCodes[m[1]] = true
			}
		}
	}
	if len(methods) == 0 || len(numeric) == 0 || len(data) == 0 || len(proofCodes) == 0 {
		t.Fatalf("docs/protocol.md: parsed %d methods, %d numeric codes, %d data codes, %d proof codes; its headings or §5 tables changed shape",
			len(methods), len(numeric), len(data), len(proofCodes))
	}
	return methods, numeric, data, proofCodes
}

// protocolConstants parses package protocol's constant declarations.
func protocolConstants(t *testing.T) (methods, numeric, errs map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	dir := repoFile(t, "protocol")
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	methods, numeric, errs = map[string]string{}, map[string]string{}, map[string]string{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						val := literal(vs.Values[i])
						if val == "" {
							continue
						}
						n := name.Name
						switch {
						case strings.HasPrefix(n, "Method"), strings.HasPrefix(n, "Notify"), n == "RequestPermission":
							methods[val] = n
						case strings.HasPrefix(n, "Code"):
							numeric[val] = n
						case strings.HasPrefix(n, "Err"):
							errs[val] = n
						}
					}
				}
			}
		}
	}
	return methods, numeric, errs
}

// literal is the value of a string or (negated) integer literal, "" else.
func literal(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			s, _ := strconv.Unquote(v.Value)
			return s
		}
		if v.Kind == token.INT {
			return v.Value
		}
	case *ast.UnaryExpr:
		if v.Op == token.SUB {
			if s := literal(v.X); s != "" {
				return "-" + s
			}
		}
	}
	return ""
}

func setOf(vals []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// missing lists the keys of a that b lacks, sorted.
func missing[A, B any](a map[string]A, b map[string]B) []string {
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func agree[A, B any](t *testing.T, what, nameA string, a map[string]A, nameB string, b map[string]B) {
	t.Helper()
	if m := missing(a, b); len(m) > 0 {
		t.Errorf("%s in %s but not in %s: %v", what, nameA, nameB, m)
	}
	if m := missing(b, a); len(m) > 0 {
		t.Errorf("%s in %s but not in %s: %v", what, nameB, nameA, m)
	}
}

// TestAgreement_Methods: docs/protocol.md, the schema and package protocol
// name the same methods. A schema method marked x-pending (specified in
// PROTOCOL.md, not implemented yet) must be in neither of the others; once
// it is, its mark must go.
func TestAgreement_Methods(t *testing.T) {
	s := mustSchema(t)
	docMethods, _, _, _ := docVocabulary(t)
	constMethods, _, _ := protocolConstants(t)
	schemaMethods := map[string]bool{}
	for _, m := range s.Methods() {
		if !m.Pending {
			schemaMethods[m.Name] = true
			continue
		}
		_, inConst := constMethods[m.Name]
		if docMethods[m.Name] || inConst {
			t.Errorf("%s is documented or has a protocol constant now: drop its x-pending mark in docs/protocol.schema.json and check its definitions", m.Name)
		}
	}
	agree(t, "methods", "docs/protocol.md", docMethods, "docs/protocol.schema.json x-methods", schemaMethods)
	agree(t, "methods", "package protocol constants", constMethods, "docs/protocol.schema.json x-methods", schemaMethods)
}

// TestAgreement_ErrorCodes: the numeric codes and the data codes of
// docs/protocol.md §5, of the schema's ErrorCode and DataCode, and of
// package protocol's Code*/Err* constants are the same sets (Err*
// constants that are proof error codes, §12, are exempt from DataCode).
func TestAgreement_ErrorCodes(t *testing.T) {
	s := mustSchema(t)
	_, docNumeric, docData, docProof := docVocabulary(t)
	_, constNumeric, constErrs := protocolConstants(t)
	schemaNumeric, schemaData := setOf(s.Enum("ErrorCode")), setOf(s.Enum("DataCode"))
	if len(schemaNumeric) == 0 || len(schemaData) == 0 {
		t.Fatal("schema $defs ErrorCode or DataCode has no enum")
	}
	agree(t, "numeric error codes", "docs/protocol.md §5", docNumeric, "schema ErrorCode", schemaNumeric)
	agree(t, "numeric error codes", "package protocol Code* constants", constNumeric, "schema ErrorCode", schemaNumeric)
	agree(t, "data codes", "docs/protocol.md §5", docData, "schema DataCode", schemaData)
	constData := map[string]string{}
	for v, name := range constErrs {
		if !schemaData[v] && docProof[v] {
			continue // a proof error code (§12), not a data code
		}
		constData[v] = name
	}
	agree(t, "data codes", "package protocol Err* constants", constData, "schema DataCode", schemaData)
}
