package sqlite

import "syscall"

// osStatfs returns the f_type of the filesystem holding dir. The magic
// numbers are 32-bit; the field's Go type differs between architectures.
func osStatfs(dir string) (uint32, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint32(st.Type), nil
}
