package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Tree records every entry under root — each file's bytes, mode and mtime,
// each directory's mode, mtime and entry count — for a test to check that
// nothing under it changed.
func Tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		key := p + " " + info.Mode().String() + " " + info.ModTime().Format(time.RFC3339Nano)
		if d.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			out[key] = fmt.Sprint(len(entries), " entries")
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[key] = string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}
