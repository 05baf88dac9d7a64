package vfs

import "golang.org/x/sys/unix"

func unixUmask(mask int) int { return unix.Umask(mask) }
