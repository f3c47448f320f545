package seccomp

import (
	"sort"
	"strconv"
	"sync"
)

//go:generate go run ./gen

// numbers maps this GOARCH's syscall names to their numbers. Built at the
// first use, not at init: a map literal of this size is built by the
// package's initialiser in every program that links the package, which a
// run with a filter compiled ahead (the default policy's) never needs.
var numbers = sync.OnceValue(numberTable)

// Number returns the number of the named syscall on this GOARCH.
func Number(name string) (uint32, bool) {
	n, ok := numbers()[name]
	return n, ok
}

var byNumber = sync.OnceValue(func() map[uint32]string {
	m := make(map[uint32]string, len(numbers()))
	for name, n := range numbers() {
		m[n] = name
	}
	return m
})

// Name returns the name of syscall nr on this GOARCH, or "syscall_<nr>"
// for a number the table does not know.
func Name(nr uint32) string {
	if name, ok := byNumber()[nr]; ok {
		return name
	}
	return "syscall_" + strconv.FormatUint(uint64(nr), 10)
}

// Names returns every syscall name the table knows, sorted.
func Names() []string {
	names := make([]string, 0, len(numbers()))
	for name := range numbers() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
