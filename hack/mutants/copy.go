package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// copyFiles copies files (paths relative to root) from root into dir,
// keeping each one's mode; a symbolic link is copied as a link, and a
// file listed but deleted from the working tree is left out.
func copyFiles(root, dir string, files []string) error {
	for _, f := range files {
		src, dst := filepath.Join(root, f), filepath.Join(dir, f)
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		}
		if !info.Mode().IsRegular() {
			continue // a submodule's directory, say
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// writeKeepingMode replaces the content of the file at path.
func writeKeepingMode(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, info.Mode().Perm())
}
