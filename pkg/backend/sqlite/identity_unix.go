//go:build unix

package sqlite

import (
	"fmt"
	"os"
	"syscall"
)

// describeFile names a file by what os.SameFile compares on unix: the
// device and inode numbers.
func describeFile(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "size " + fmt.Sprint(fi.Size())
	}
	return fmt.Sprintf("device %d, inode %d", st.Dev, st.Ino)
}

// linkCount is how many directory entries name the file fi describes; 0
// once it was removed from every directory (a stat through an open
// descriptor still describes it then).
func linkCount(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}
