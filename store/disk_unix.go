//go:build linux || darwin || freebsd

package store

import "syscall"

// diskSpace reads the file system that holds dir: the bytes a process
// without special privileges may still write there (statfs's f_bavail,
// what df shows as available) and its size.
func diskSpace(dir string) (free, size uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), true
}
