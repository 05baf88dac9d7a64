package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/vfs"
)

// producerIDFile keeps, in the data directory, the end of the block of
// producer ids handed out so far: a restart starts past it, so no id is
// ever given twice.
const producerIDFile = checkpoint.ProducerIDBlockFile

// producerIDBlock is how many ids one durable write reserves.
const producerIDBlock = 1000

// producerIDs allocates producer ids durably, a block at a time.
type producerIDs struct {
	fsys vfs.FS // the data directory's, with its modes
	path string
	mu   sync.Mutex // guards next and end
	next int64      // the next id to hand out
	end  int64      // the end of the reserved block (durable)
	// reserve, if set, reserves blocks instead of the file: a cluster's,
	// so that no two brokers hand out one id.
	reserve func(n int64) (int64, error)
}

func openProducerIDs(fsys vfs.FS, path string) (*producerIDs, error) {
	p := &producerIDs{fsys: fsys, path: path}
	data, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("broker: reading %s: %w", path, err)
	default:
		end, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || end < 0 {
			return nil, fmt.Errorf("broker: %s holds %q, not a producer id", path, strings.TrimSpace(string(data)))
		}
		p.next, p.end = end, end
	}
	return p, nil
}

// allocate returns a producer id never handed out before, by this broker
// or one before it on the directory.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == p.end && p.reserve != nil {
		first, err := p.reserve(producerIDBlock)
		if err != nil {
			return 0, fmt.Errorf("broker: reserving producer ids: %w", err)
		}
		p.next, p.end = first, first+producerIDBlock
	}
	if p.next == p.end {
		end := p.end + producerIDBlock
		if err := vfs.WriteAtomic(p.fsys, p.path, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
			return 0, fmt.Errorf("broker: reserving producer ids: %w", err)
		}
		p.end = end
	}
	id := p.next
	p.next++
	return id, nil
}
