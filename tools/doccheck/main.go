// Command doccheck reports the exported identifiers that have no doc comment, package
// by package, and fails when a package it is told to enforce has any. `make lint` runs
// it over the whole module:
//
//	go run ./tools/doccheck -enforce ./... -pending rnic,qp ./...
//
// The arguments are package patterns as the go command spells them for directories
// ("./...", "./roce/...", "./lab"); -enforce takes a comma-separated list of the same,
// and -pending a comma-separated list of package directories ("rnic/service/wire")
// that -enforce matches but that are not documented yet. For each package of the
// arguments with undocumented identifiers it prints one line, "dir: N of M exported
// identifiers undocumented"; for an enforced package it then prints each of them,
// "file:line: kind Name has no doc comment", and exits 1. A pending package that has
// become clean fails too, so that the list only shrinks: a new package is enforced
// from its first commit.
//
// An exported identifier is what go doc lists: a package-level const, var, type or
// func whose name is exported, and an exported method of an exported type. It is
// documented by a comment on its own declaration, on the parenthesised group it
// stands in (a block of constants under one comment), or at the end of its line in
// such a group. Test files, testdata and directories go ignores (".x", "_x") are not
// read; build constraints are honoured as `go build` honours them here.
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }

// run is main with its arguments and output, returning the exit status.
func run(args []string, out io.Writer) int {
	flags := flag.NewFlagSet("doccheck", flag.ContinueOnError)
	flags.SetOutput(out)
	enforce := flags.String("enforce", "", "comma-separated package patterns that must document every exported identifier")
	pendingList := flags.String("pending", "", "comma-separated package directories -enforce matches that are not documented yet")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	patterns := flags.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	dirs, err := expand(patterns)
	if err != nil {
		fmt.Fprintln(out, "doccheck:", err)
		return 2
	}
	var enforced []string
	if *enforce != "" {
		if enforced, err = expand(strings.Split(*enforce, ",")); err != nil {
			fmt.Fprintln(out, "doccheck:", err)
			return 2
		}
	}
	var pending []string
	if *pendingList != "" {
		pending = strings.Split(*pendingList, ",")
	}
	status := 0
	for _, dir := range pending {
		if !slices.Contains(enforced, dir) {
			fmt.Fprintf(out, "doccheck: pending package %s is not among the enforced ones\n", dir)
			status = 1
		}
	}
	for _, dir := range dirs {
		missing, total, err := check(dir)
		if err != nil {
			fmt.Fprintln(out, "doccheck:", err)
			return 2
		}
		isPending := slices.Contains(pending, dir)
		if len(missing) == 0 {
			if isPending {
				fmt.Fprintf(out, "doccheck: pending package %s documents every exported identifier: enforce it\n", dir)
				status = 1
			}
			continue
		}
		enforcing := slices.Contains(enforced, dir) && !isPending
		note := ""
		switch {
		case isPending:
			note = " (pending)"
		case !enforcing:
			note = " (not enforced)"
		}
		fmt.Fprintf(out, "%s: %d of %d exported identifiers undocumented%s\n", dir, len(missing), total, note)
		if enforcing {
			status = 1
			for _, m := range missing {
				fmt.Fprintf(out, "\t%s\n", m)
			}
		}
	}
	// An enforced package outside the arguments is enforced all the same: a typo in
	// the Makefile must not pass silently.
	for _, dir := range enforced {
		if !slices.Contains(dirs, dir) {
			fmt.Fprintf(out, "doccheck: enforced package %s is not among %s\n", dir, strings.Join(patterns, " "))
			status = 1
		}
	}
	return status
}

// expand turns package patterns into the directories holding a Go package, cleaned
// ("roce/cm"), sorted. A pattern that matches no package is an error.
func expand(patterns []string) ([]string, error) {
	var dirs []string
	for _, p := range patterns {
		root, recursive := strings.CutSuffix(p, "/...")
		if p == "..." {
			root, recursive = ".", true
		}
		root = filepath.Clean(root)
		var found []string
		if !recursive {
			if isPackage(root) {
				found = append(found, root)
			}
		} else {
			err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if !d.IsDir() {
					return nil
				}
				if name := d.Name(); path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
					return filepath.SkipDir
				}
				if isPackage(path) {
					found = append(found, path)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("pattern %s matches no package", p)
		}
		dirs = append(dirs, found...)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), nil
}

// isPackage reports whether dir holds Go files that build here (test files aside).
func isPackage(dir string) bool {
	p, err := build.ImportDir(dir, 0)
	return err == nil && len(p.GoFiles) > 0
}

// check returns the undocumented exported identifiers of the package in dir, as
// "file:line: kind Name has no doc comment", and how many exported identifiers it has.
func check(dir string) (missing []string, total int, err error) {
	p, err := build.ImportDir(dir, 0)
	var noGo *build.NoGoError
	if errors.As(err, &noGo) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, 0, err
		}
		report := func(pos token.Pos, kind, name string, documented bool) {
			total++
			if !documented {
				missing = append(missing, fmt.Sprintf("%s: %s %s has no doc comment", fset.Position(pos), kind, name))
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				kind, name := "func", d.Name.Name
				if d.Recv != nil {
					recv := receiverType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue // not in go doc: the type is unexported
					}
					kind, name = "method", recv+"."+name
				}
				report(d.Pos(), kind, name, d.Doc != nil)
			case *ast.GenDecl:
				// A group's comment documents every spec in it; a lone declaration's
				// comment is the group's, as go/ast parses it.
				grouped := d.Lparen.IsValid() && d.Doc != nil
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							report(s.Pos(), "type", s.Name.Name, grouped || d.Doc != nil || s.Doc != nil || s.Comment != nil)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								report(n.Pos(), d.Tok.String(), n.Name, grouped || d.Doc != nil || s.Doc != nil || s.Comment != nil)
							}
						}
					}
				}
			}
		}
	}
	return missing, total, nil
}

// receiverType returns the name of a method's receiver type: T for T, *T, T[K] and
// *T[K].
func receiverType(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.ParenExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
