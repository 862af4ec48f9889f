//go:build !unix

package sqlite

import (
	"fmt"
	"os"
	"time"
)

// describeFile names a file where no device and inode numbers are at hand:
// by size and modification time, enough for an operator to tell two files
// apart in a message. os.SameFile still does the comparison.
func describeFile(fi os.FileInfo) string {
	return fmt.Sprintf("size %d, modified %s", fi.Size(), fi.ModTime().UTC().Format(time.RFC3339))
}

// linkCount cannot read a link count on this system.
func linkCount(os.FileInfo) (uint64, bool) { return 0, false }
