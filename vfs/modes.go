package vfs

import (
	"io"
	"os"
)

// Default permissions of what the engine creates: the log is readable by
// its group (operators, backup) and no one else.
const (
	DefaultFileMode os.FileMode = 0o640
	DefaultDirMode  os.FileMode = 0o750
)

// WithModes wraps fs so that every file it creates gets file's permission
// bits and every directory dir's, whatever its caller asked for (the
// process umask still applies, as it does to any creation). Zero keeps
// the defaults, DefaultFileMode and DefaultDirMode.
func WithModes(fs FS, file, dir os.FileMode) FS {
	fs = OrOS(fs)
	if file == 0 {
		file = DefaultFileMode
	}
	if dir == 0 {
		dir = DefaultDirMode
	}
	return &modeFS{FS: fs, file: file.Perm(), dir: dir.Perm()}
}

type modeFS struct {
	FS
	file, dir os.FileMode
}

func (m *modeFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	return m.FS.OpenFile(name, flag, m.file)
}

func (m *modeFS) MkdirAll(dir string, _ os.FileMode) error { return m.FS.MkdirAll(dir, m.dir) }

// Lock creates the lock file with the file mode before locking it.
func (m *modeFS) Lock(name string) (io.Closer, error) {
	if info, err := m.FS.Stat(name); err != nil || !info.IsDir() {
		if f, err := m.FS.OpenFile(name, os.O_RDWR|os.O_CREATE, m.file); err == nil {
			_ = f.Close()
		}
	}
	return m.FS.Lock(name)
}
