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
