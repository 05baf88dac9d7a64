package seglog_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
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
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "testdata", "node_modules", ".git", "examples", "cmd":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
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
			return nil
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
		return nil
	})
	require.NoError(t, err)
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
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git", "examples", "peers":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
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
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, silent, "mutexes that do not say what they guard")
}
