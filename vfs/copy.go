package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CopyTree copies the directory tree srcDir of src to dstDir of dst
// (created if missing): every directory and regular file, each file
// synced and each directory's entries synced, so that the copy is durable
// when it returns. Files already in dstDir are overwritten, never
// removed. It is how a simulated disk is loaded from a real directory and
// written back to one (the fault checker's power cuts).
func CopyTree(dst FS, dstDir string, src FS, srcDir string) error {
	dst, src = OrOS(dst), OrOS(src)
	if err := dst.MkdirAll(dstDir, 0o755); err != nil {
		return err
	}
	names, err := src.List(srcDir)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, name := range names {
		from, to := filepath.Join(srcDir, name), filepath.Join(dstDir, name)
		fi, err := src.Stat(from)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := CopyTree(dst, to, src, from); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := copyFile(dst, to, src, from, buf); err != nil {
				return err
			}
		}
	}
	return dst.SyncDir(dstDir)
}

func copyFile(dst FS, to string, src FS, from string, buf []byte) error {
	in, err := src.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.OpenFile(to, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	var off int64
	for {
		n, rerr := in.ReadAt(buf, off)
		if n > 0 {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				out.Close()
				return err
			}
			off += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			out.Close()
			return fmt.Errorf("vfs: copying %s: %w", from, rerr)
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
