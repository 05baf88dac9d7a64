package record

import "math/bits"

// Zig-zag varints as Kafka's ByteUtils writes them: a varint takes at most
// 5 bytes and a varlong at most 10; a continuation bit on the last allowed
// byte makes the value invalid.

// readVarint decodes a zig-zag varint from b. It returns the value and the
// number of bytes read, or n <= 0: 0 if b ended first, -1 if the varint is
// too long. Bits beyond 32 in a 5-byte varint are dropped, as Kafka does.
func readVarint(b []byte) (int32, int) {
	var raw uint32
	for i := 0; i < maxVarintLen32; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		raw |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(raw>>1) ^ -int32(raw&1), i + 1
		}
	}
	return 0, -1
}

// readVarlong decodes a zig-zag varlong; see readVarint.
func readVarlong(b []byte) (int64, int) {
	var raw uint64
	for i := 0; i < maxVarintLen64; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		raw |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(raw>>1) ^ -int64(raw&1), i + 1
		}
	}
	return 0, -1
}

func appendVarint(dst []byte, v int32) []byte {
	return appendUvarint(dst, uint64(uint32(v<<1)^uint32(v>>31)))
}

func appendVarlong(dst []byte, v int64) []byte {
	return appendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func appendUvarint(dst []byte, u uint64) []byte {
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

func sizeOfVarint(v int32) int {
	return sizeOfUvarint(uint64(uint32(v<<1) ^ uint32(v>>31)))
}

func sizeOfVarlong(v int64) int {
	return sizeOfUvarint(uint64(v<<1) ^ uint64(v>>63))
}

func sizeOfUvarint(u uint64) int {
	// Each byte carries 7 bits; zero still takes one byte.
	return (bits.Len64(u|1) + 6) / 7
}
