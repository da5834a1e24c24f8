package store

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"unsafe"
)

// The slots that mark work in progress (work.go): a file of slotCount
// slots of slotSize bytes, mapped into memory. A slot's first 8 bytes are
// 0 when it is free, else markedBit and the length of the key that
// follows them.
const (
	workSlotsFile = "work-slots"
	slotSize      = 256
	slotCount     = 1024
	slotKeyMax    = slotSize - 8
	markedBit     = 1 << 63
)

// slots are the mapped slots and those free. The caller serialises
// every call (work.mu). A nil *slots has no free slot.
type slots struct {
	mem   []byte
	free  []int32
	unmap func() error
}

func newSlots(mem []byte, unmap func() error) *slots {
	s := &slots{mem: mem, unmap: unmap, free: make([]int32, slotCount)}
	for i := range s.free {
		s.free[i] = int32(slotCount - 1 - i) // the first slots first: the fewest pages touched
	}
	return s
}

// mark writes k into a free slot and returns it; ok is false when k does
// not fit a slot or none is free. The key is written before the word that
// marks the slot, so a process that dies in between leaves a free slot.
func (s *slots) mark(k []byte) (i int32, ok bool) {
	if s == nil || len(k) > slotKeyMax || len(s.free) == 0 {
		return 0, false
	}
	i = s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	b := s.mem[int(i)*slotSize:][:slotSize]
	copy(b[8:], k)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[0])), markedBit|uint64(len(k)))
	return i, true
}

// clear frees slot i, marked by mark.
func (s *slots) clear(i int32) {
	if s == nil {
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.mem[int(i)*slotSize])), 0)
	s.free = append(s.free, i)
}

func (s *slots) close() {
	_ = s.unmap()
}

// leftMarks reads the keys of the slots marked in the file at path: the
// work a process that died left there.
func leftMarks(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	for off := 0; off+slotSize <= len(b); off += slotSize {
		h := binary.NativeEndian.Uint64(b[off:])
		if n := h &^ markedBit; h&markedBit != 0 && n <= slotKeyMax {
			keys = append(keys, string(b[off+8:off+8+int(n)]))
		}
	}
	return keys, nil
}
