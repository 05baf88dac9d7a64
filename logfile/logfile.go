package logfile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/seglog/seglog"
)

// Kind is the type of a segment file, told by its extension.
type Kind int8

// File kinds.
const (
	Log Kind = iota
	Index
	TimeIndex
	TxnIndex
	Snapshot
)

// Extensions and temporary suffixes: part of the on-disk format; never
// change.
var extensions = [...]string{Log: ".log", Index: ".index", TimeIndex: ".timeindex", TxnIndex: ".txnindex",
	Snapshot: ".snapshot"}

// Temporary suffixes, appended to a full file name.
const (
	// DeletedSuffix marks a file waiting to be removed.
	DeletedSuffix = ".deleted"
	// CleanedSuffix marks a file being written by a segment replacement.
	CleanedSuffix = ".cleaned"
	// SwapSuffix marks a finished replacement waiting to be renamed in.
	SwapSuffix = ".swap"
)

// offsetDigits is the width of the zero-padded base offset in a name.
const offsetDigits = 20

// Ext returns the kind's extension, with its dot.
func (k Kind) Ext() string {
	if k >= 0 && int(k) < len(extensions) {
		return extensions[k]
	}
	return fmt.Sprintf(".kind%d", int8(k))
}

func (k Kind) String() string { return strings.TrimPrefix(k.Ext(), ".") }

// ErrBadName is returned by ParseFilename for a name Kafka would not write.
var ErrBadName = seglog.NewKafkaError("logfile: not a segment file name", -1)

// Filename returns the name of a segment file: the base offset as 20
// zero-padded digits, then the kind's extension
// ("00000000000000000045.index").
func Filename(base int64, k Kind) string {
	return fmt.Sprintf("%0*d%s", offsetDigits, base, k.Ext())
}

// FilenameWithSuffix returns Filename with a temporary suffix appended
// (DeletedSuffix, CleanedSuffix, SwapSuffix, or "" for none).
func FilenameWithSuffix(base int64, k Kind, suffix string) string {
	return Filename(base, k) + suffix
}

// Name is a parsed segment file name.
type Name struct {
	Base   int64
	Kind   Kind
	Suffix string // "", DeletedSuffix, CleanedSuffix or SwapSuffix
}

// String returns the file name.
func (n Name) String() string { return FilenameWithSuffix(n.Base, n.Kind, n.Suffix) }

// ParseFilename parses a base name (no directory) as a segment file name.
// Like Kafka, it reads the base offset from the digits before the first
// '.', whatever their number.
func ParseFilename(name string) (Name, error) {
	digits, rest, ok := strings.Cut(name, ".")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return Name{}, fmt.Errorf("%w: %q", ErrBadName, name)
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return Name{}, fmt.Errorf("%w: %q: %w", ErrBadName, name, err)
	}
	rest = "." + rest
	n := Name{Base: base}
	for _, s := range []string{DeletedSuffix, CleanedSuffix, SwapSuffix} {
		if strings.HasSuffix(rest, s) {
			n.Suffix, rest = s, strings.TrimSuffix(rest, s)
			break
		}
	}
	for k, ext := range extensions {
		if rest == ext {
			n.Kind = Kind(k)
			return n, nil
		}
	}
	return Name{}, fmt.Errorf("%w: %q has an unknown extension", ErrBadName, name)
}
