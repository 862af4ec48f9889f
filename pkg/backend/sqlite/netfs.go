package sqlite

import (
	"fmt"
	"path/filepath"
)

// statfsFunc reports the filesystem type (statfs f_type) of the filesystem
// holding dir. It returns 0 where the type cannot be told, which counts as
// local.
type statfsFunc func(dir string) (uint32, error)

// networkFS names the Linux filesystem magics (statfs f_type) of network and
// cluster filesystems, on which SQLite's locking cannot be trusted.
var networkFS = map[uint32]string{
	0x6969:     "nfs",
	0x517B:     "smb",
	0xFF534D42: "cifs",
	0xFE534D42: "smb2",
	0x01021997: "9p",
	0x65735546: "fuse",
	0x00C36400: "ceph",
	0x5346414F: "afs",
	0x73757245: "coda",
	0x564C:     "ncp",
	0x0BD00BD0: "lustre",
	0x01161970: "gfs2",
	0x7461636F: "ocfs2",
}

// checkNetworkFS refuses a database on a network filesystem, or, when allow
// is set, returns a warning for the caller to log instead. statfs nil means
// the operating system's.
func checkNetworkFS(path string, statfs statfsFunc, allow bool) (warning string, err error) {
	if statfs == nil {
		statfs = osStatfs
	}
	dir := filepath.Dir(path)
	magic, err := statfs(dir)
	if err != nil {
		return "", fmt.Errorf("sqlite: open %s: inspect the filesystem of %s: %w", path, dir, err)
	}
	name, ok := networkFS[magic]
	if !ok {
		return "", nil
	}
	if !allow {
		return "", fmt.Errorf("sqlite: %s is on a network filesystem (%s); SQLite locking is not safe there: "+
			"use the lease backend, or --sqlite-allow-network-fs to override", path, name)
	}
	return fmt.Sprintf("sqlite: %s is on a network filesystem (%s); SQLite locking is not safe there, "+
		"continuing because the network-filesystem check is overridden", path, name), nil
}
