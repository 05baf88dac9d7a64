package record

import "fmt"

// Recompress returns b with its records compressed with c instead: the
// same header (producer, sequence, timestamps, offset deltas, flags) but
// for the codec, and the same record encodings, decompressed within limit
// bytes. It is what a topic's compression.type other than "producer" does
// to a batch the producer compressed otherwise, as Kafka's broker
// recompresses it. b must have been validated (its CRC checked): the new
// batch gets a new CRC over what was read.
func Recompress(b Batch, c Compression, limit int) (Batch, error) {
	if !c.Valid() {
		return Batch{}, fmt.Errorf("%w: %d", ErrUnknownCompression, c)
	}
	h := b.Header()
	h.Attributes = h.Attributes&^compressionMask | Attributes(c)&compressionMask
	bl := NewBuilder(c)
	bl.SetHeader(h)
	var it Iter
	it.Reset(b, limit)
	for it.Next() {
		if err := bl.AppendRaw(it.Record()); err != nil {
			return Batch{}, err
		}
	}
	if err := it.Err(); err != nil {
		return Batch{}, err
	}
	return bl.Build()
}
