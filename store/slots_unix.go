//go:build linux || darwin || freebsd

package store

import (
	"fmt"
	"os"
	"syscall"
)

// mapSlots empties the file at path (creating it), sizes it for the
// slots, and maps it into memory, shared: a store to a slot is in the
// operating system's page cache of the file at once, and stays there
// when the process dies.
func mapSlots(path string) (*slots, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("work slots: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	if err := f.Truncate(0); err != nil {
		return nil, fmt.Errorf("work slots: %w", err)
	}
	if err := f.Truncate(slotCount * slotSize); err != nil {
		return nil, fmt.Errorf("work slots: %w", err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, slotCount*slotSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("work slots: map %s: %w", path, err)
	}
	return newSlots(mem, func() error { return syscall.Munmap(mem) }), nil
}
