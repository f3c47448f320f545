//go:build !unix

package image

import "errors"

// fileID has no device and inode to give here: nothing is cached.
func fileID(string) (string, error) { return "", errors.New("no inode numbers on this system") }
