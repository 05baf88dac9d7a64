package timeindex

import "github.com/seglog/seglog/internal/mmapfile"

// Opened describes what opening an existing index file found: the entries
// it has room for (Slots), the length of its valid prefix (Entries), and
// why that prefix ends early (StopReason: "zero entry", "not increasing",
// or ""). Untrimmed reports slots beyond the valid entries.
type Opened = mmapfile.Opened

// lifecycle gives Index the file's lifecycle methods: Path, IsOpen,
// Open, Entries, MaxEntries, Length, Resize, TrimToValidSize, Reset,
// Flush, Close, Rename, Delete.
type lifecycle = mmapfile.Lifecycle
