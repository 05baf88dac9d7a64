package seglog_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// No exported name of a public package has an internal package's type in
// its signature (a parameter, a result, a field, an embedded type, a
// variable): a program that embeds seglog could not name it. A public
// alias of an internal type (type Opened = mmapfile.Opened) is how one is
// made public, and is allowed.
func TestNoInternalTypeInExportedSignatures(t *testing.T) {
	var leaks []string
	fset := token.NewFileSet()
	eachGoFile(t, fset, parser.SkipObjectResolution, []string{"internal", "cmd"}, func(f *ast.File) {
		internal := map[string]bool{} // local names of imported internal packages
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
				name := p[strings.LastIndex(p, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				internal[name] = true
			}
		}
		if len(internal) == 0 {
			return
		}
		leak := func(what string, n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
						leaks = append(leaks, fset.Position(sel.Pos()).String()+": "+what+" uses "+id.Name+"."+sel.Sel.Name)
					}
				}
				return true
			})
		}
		exportedFields := func(what string, st *ast.StructType) {
			for _, fld := range st.Fields.List {
				if len(fld.Names) == 0 { // embedded: its type's name is the field's
					if ast.IsExported(typeName(fld.Type)) {
						leak(what+" (embedded)", fld.Type)
					}
					continue
				}
				for _, n := range fld.Names {
					if n.IsExported() {
						leak(what+"."+n.Name, fld.Type)
					}
				}
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !ast.IsExported(typeName(d.Recv.List[0].Type)) {
					continue
				}
				leak(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() || s.Assign.IsValid() {
							continue // unexported, or a public alias
						}
						switch ty := s.Type.(type) {
						case *ast.StructType:
							exportedFields(s.Name.Name, ty)
						case *ast.InterfaceType:
							leak(s.Name.Name, ty)
						default:
							leak(s.Name.Name, ty)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								leak(n.Name, s.Type)
							}
						}
					}
				}
			}
		}
	})
	require.Empty(t, leaks, "internal types in exported signatures")
}

// typeName is the name of a (possibly pointer, possibly qualified) type.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return ""
}

// Every mutex that is a struct's field says what it guards (a comment on
// the field: the fields it guards, or what it serializes), or is embedded
// in a struct of the fields it guards (mu struct{ sync.Mutex; … }): a
// reader must not have to work out which fields a lock covers.
func TestMutexesSayWhatTheyGuard(t *testing.T) {
	var silent []string
	fset := token.NewFileSet()
	eachGoFile(t, fset, parser.ParseComments|parser.SkipObjectResolution, []string{"peers"}, func(f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fl := range st.Fields.List {
				sel, ok := fl.Type.(*ast.SelectorExpr)
				if !ok || len(fl.Names) == 0 {
					continue // (an embedded mutex: its struct is what it guards)
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "sync" || sel.Sel.Name != "Mutex" && sel.Sel.Name != "RWMutex" {
					continue
				}
				if fl.Doc == nil && fl.Comment == nil {
					silent = append(silent, fset.Position(fl.Pos()).String())
				}
			}
			return true
		})
	})
	require.Empty(t, silent, "mutexes that do not say what they guard")
}

// eachGoFile parses (in mode) every non-test Go file of the repository
// but those under testdata, node_modules, .git, examples and the
// directories named in skip, and calls fn with each.
func eachGoFile(t *testing.T, fset *token.FileSet, mode parser.Mode, skip []string, fn func(f *ast.File)) {
	t.Helper()
	skip = append(skip, "testdata", "node_modules", ".git", "examples")
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if slices.Contains(skip, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		fn(f)
		return nil
	})
	require.NoError(t, err)
}

// The arrows of docs/architecture.md that a change could break without
// a compile error: each package named imports (directly) none of the
// packages listed against it.
func TestArrows(t *testing.T) {
	const mod = "github.com/seglog/seglog/"
	forbidden := map[string][]string{
		"replica/state": {""}, // (pure: no package of the module at all)
		"config":        {""}, // (a table: the engine reads it too)
		"cluster":       {"tablet", "segment", "recovery", "replica", "broker", "coordinator", "tiering"},
		"console":       {"tablet", "replica", "cluster", "coordinator", "segment", "tiering"},
		"tablet":        {"tiering", "broker", "replica", "cluster"},
		"replica":       {"broker", "server", "coordinator"},
		"broker":        {"server", "console"},
	}
	allowed := map[string]bool{"cluster→replica/state": true} // (the controller's rules are pure)
	for dir, bad := range forbidden {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		fset := token.NewFileSet()
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if !strings.HasPrefix(p, mod) {
					continue
				}
				p = strings.TrimPrefix(p, mod)
				for _, b := range bad {
					if (b == "" || p == b || strings.HasPrefix(p, b+"/")) && !allowed[dir+"→"+p] {
						t.Errorf("%s/%s imports %s", dir, e.Name(), p)
					}
				}
			}
		}
	}
}
