package kvhash

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/zeebo/blake3"
)

// KeySize is the exact length in bytes of a keyed-xxh3-v1 provider key.
const KeySize = 32

// keyedDomain is absorbed first (including its trailing NUL) so digests of
// this scheme can never collide with other uses of the same key.
const keyedDomain = "dynamo.router.tracking-hash/keyed-xxh3-v1\x00"

// Field tags of the keyed-xxh3-v1 scope framing. The numbering is part of
// the wire contract shared with Dynamo and must never change.
const (
	tagKeyID          = 1
	tagModelName      = 2
	tagRoutingGroup   = 3
	tagBlockSize      = 4
	tagCacheNamespace = 5
	tagLoraName       = 6
	tagEagle          = 7
)

// Sentinel errors of NewKeyedScheme. The wrapped messages match Dynamo's
// configuration errors word for word so operators see the same text.
var (
	// ErrKeySize: the provider key is not exactly KeySize bytes.
	ErrKeySize = errors.New("router tracking key file must contain exactly 32 raw bytes")
	// ErrKeyID: the key id is empty or has surrounding whitespace.
	ErrKeyID = errors.New("keyed-xxh3-v1 requires a nonempty router_tracking_key_id")
)

// KeyedScheme derives keyed-xxh3-v1 tracking-hash seeds. It holds a copy of
// the provider key, which it never exposes (String redacts it).
//
// A KeyedScheme is immutable after construction and safe for concurrent use.
type KeyedScheme struct {
	key   [KeySize]byte
	keyID string
}

// NewKeyedScheme validates and copies key and keyID. key must be exactly
// KeySize raw bytes (ErrKeySize, message "...; found N"); keyID must be
// non-empty without leading or trailing whitespace (ErrKeyID).
func NewKeyedScheme(key []byte, keyID string) (*KeyedScheme, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w; found %d", ErrKeySize, len(key))
	}
	if keyID == "" || strings.TrimSpace(keyID) != keyID {
		return nil, ErrKeyID
	}
	k := &KeyedScheme{keyID: keyID}
	copy(k.key[:], key)
	return k, nil
}

// KeyID returns the provider-managed key epoch (safe to log).
func (k *KeyedScheme) KeyID() string { return k.keyID }

// String identifies the scheme without revealing key material.
func (k *KeyedScheme) String() string {
	return "keyed-xxh3-v1(key_id=" + k.keyID + ", key=[REDACTED])"
}

// Seeds derives the block seed and chain seed for one routing scope:
//
//	BLAKE3-keyed(key, domain || frame(1,keyID) || frame(2,model) ||
//	    frame(3,routingGroup) || frame(4,LE32(blockSize)) ||
//	    optframe(5,cacheNamespace) || optframe(6,lora) || frame(7,[eagle]))
//
// where frame(t,b) = [t][LE64(len b)][b] and optframe(t,s) = [t][0] when s is
// empty, else [t][1][LE64(len s)][s]. blockSeed is digest bytes [0,8) and
// chainSeed bytes [8,16), both little-endian. Use blockSeed with BlockHash /
// BlockHashes and chainSeed with SequenceHashes.
func (k *KeyedScheme) Seeds(model, routingGroup string, blockSize uint32, cacheNamespace, lora string, eagle bool) (blockSeed, chainSeed uint64) {
	h, err := blake3.NewKeyed(k.key[:])
	if err != nil {
		// Unreachable: the key length is fixed by the array type.
		return 0, 0
	}
	_, _ = h.WriteString(keyedDomain)
	writeFrame(h, tagKeyID, k.keyID)
	writeFrame(h, tagModelName, model)
	writeFrame(h, tagRoutingGroup, routingGroup)
	var bs [4]byte
	binary.LittleEndian.PutUint32(bs[:], blockSize)
	writeFrame(h, tagBlockSize, string(bs[:]))
	writeOptionalFrame(h, tagCacheNamespace, cacheNamespace)
	writeOptionalFrame(h, tagLoraName, lora)
	e := "\x00"
	if eagle {
		e = "\x01"
	}
	writeFrame(h, tagEagle, e)
	var sum [32]byte
	h.Sum(sum[:0])
	return binary.LittleEndian.Uint64(sum[0:8]), binary.LittleEndian.Uint64(sum[8:16])
}

// TrackingHashes appends the keyed tracking (sequence) hashes of tokens for
// one scope to dst: block hashes under the derived block seed, chained with
// the derived chain seed. mm has the meaning it has in BlockHashes.
func (k *KeyedScheme) TrackingHashes(dst []uint64, tokens []uint32, model, routingGroup string, blockSize uint32, cacheNamespace, lora string, eagle bool, mm func(i int) []uint64) []uint64 {
	blockSeed, chainSeed := k.Seeds(model, routingGroup, blockSize, cacheNamespace, lora, eagle)
	bs := int(blockSize)
	n := BlockCount(len(tokens), bs, eagle)
	if n == 0 {
		return dst
	}
	start := len(dst)
	dst = BlockHashes(dst, tokens, bs, blockSeed, eagle, mm)
	// Chain in place over the freshly appended block hashes.
	blocks := dst[start:]
	for i := 1; i < len(blocks); i++ {
		blocks[i] = ChainHash(blocks[i-1], blocks[i], chainSeed)
	}
	return dst
}

// writeFrame absorbs a fixed frame [tag][LE64(len)][bytes].
func writeFrame(h *blake3.Hasher, tag byte, v string) {
	var hdr [9]byte
	hdr[0] = tag
	binary.LittleEndian.PutUint64(hdr[1:], uint64(len(v)))
	_, _ = h.Write(hdr[:])
	_, _ = h.WriteString(v)
}

// writeOptionalFrame absorbs [tag][0] for an empty (absent) value, else
// [tag][1][LE64(len)][bytes].
func writeOptionalFrame(h *blake3.Hasher, tag byte, v string) {
	if v == "" {
		_, _ = h.Write([]byte{tag, 0})
		return
	}
	var hdr [10]byte
	hdr[0] = tag
	hdr[1] = 1
	binary.LittleEndian.PutUint64(hdr[2:], uint64(len(v)))
	_, _ = h.Write(hdr[:])
	_, _ = h.WriteString(v)
}
