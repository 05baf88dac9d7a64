package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/seglog/seglog/vfs"
)

// A simulated disk (serve's hidden --simulated-disk, for the fault
// checker in jepsen/): the broker runs on the engine's crash simulator
// (vfs.MemFS) loaded from the data directory, so that a power cut can
// drop exactly what was not fsynced although the broker is a real process.
//
//   - SIGUSR1 is a power cut: the image of what fsync made durable
//     (vfs.CrashDropAll) is written over the data directory and the process
//     kills itself (SIGKILL).
//   - SIGUSR2 is a process crash: the image keeps every write, as the page
//     cache does when a process is SIGKILLed, and the process kills itself.
//   - A clean stop (SIGTERM) writes everything back.
//
// The disk stops (vfs.MemFS.Halt) at the moment of the image: nothing the
// process does after it reaches the image, and no operation after it
// completes. A real SIGKILL of such a process loses the whole disk: the
// checker sends SIGUSR2 instead.
type simDisk struct {
	dir  string // the real data directory, absolute
	mem  *vfs.MemFS
	lock io.Closer
	log  *slog.Logger
}

// openSimDisk locks dir (a sibling lock file: the directory itself is
// replaced at each crash) and loads it into a simulated disk at the same
// path, every byte durable.
func openSimDisk(dir string, log *slog.Logger) (*simDisk, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	lock, err := vfs.OS.Lock(abs + ".simdisk.lock")
	if err != nil {
		return nil, fmt.Errorf("--simulated-disk: %w", err)
	}
	d := &simDisk{dir: abs, mem: vfs.NewMem(), lock: lock, log: log}
	switch _, err := os.Stat(abs); {
	case err == nil:
		if err := vfs.CopyTree(d.mem, abs, vfs.OS, abs); err != nil {
			lock.Close()
			return nil, fmt.Errorf("--simulated-disk: loading %s: %w", abs, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		lock.Close()
		return nil, err
	}
	return d, nil
}

// watch handles SIGUSR1 (a power cut) and SIGUSR2 (a crash keeping the
// page cache): the image is written back and the process ends by SIGKILL.
func (d *simDisk) watch() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		s := <-sig
		mode := vfs.CrashKeepAll
		if s == syscall.SIGUSR1 {
			mode = vfs.CrashDropAll
		}
		img := d.mem.Halt(mode, uint64(time.Now().UnixNano()))
		if err := d.writeBack(img); err != nil {
			d.log.Error("simulated disk: writing the crash image back failed", "err", err)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}()
}

// writeBack replaces the real directory with img's copy of it.
func (d *simDisk) writeBack(img *vfs.MemFS) error {
	tmp, old := d.dir+".simdisk-new", d.dir+".simdisk-old"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if _, err := img.Stat(d.dir); errors.Is(err, fs.ErrNotExist) {
		return os.RemoveAll(d.dir) // (created after the last sync of its parent: gone)
	}
	if err := vfs.CopyTree(vfs.OS, tmp, img, d.dir); err != nil {
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(d.dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, d.dir); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// close writes everything back after a clean stop.
func (d *simDisk) close() error {
	err := d.writeBack(d.mem.Crash(vfs.CrashKeepAll, 0))
	return errors.Join(err, d.lock.Close())
}
