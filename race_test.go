//go:build race

package sandbox

func init() { raceEnabled = true }
