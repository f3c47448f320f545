package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Options.Logger is the only place the library writes to: without one it
// is silent, as a package that services embed must be.

// silent is the logger of a Sandbox without Options.Logger.
var silent = slog.New(slog.DiscardHandler)

// runIDs numbers the Runs of this process for the Logger, so that a run's start and end
// events can be paired.
var runIDs atomic.Uint64

// logger returns the Options' Logger, or one that discards.
func (o *resolved) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return silent
}

// logRun logs the end of run id: at Debug, or at Warn when the spawner
// failed under it.
func logRun(log *slog.Logger, id uint64, cmd *Cmd, res *Result, err error, took time.Duration) {
	level := slog.LevelDebug
	if errors.Is(err, ErrSpawner) {
		level = slog.LevelWarn
	}
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{slog.Uint64("run", id), slog.String("program", cmd.Path), slog.Duration("duration", took)}
	if res != nil {
		attrs = append(attrs, slog.String("outcome", res.Outcome.String()), slog.Int("exit_code", res.ExitCode),
			slog.Duration("cpu", res.CPUTime), slog.Int64("memory_peak", res.MemoryPeak),
			slog.Bool("pooled", res.Pooled), slog.Int("denials", len(res.Denials)))
		if res.Violation != "" {
			attrs = append(attrs, slog.String("violation", res.Violation))
		}
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	log.LogAttrs(context.Background(), level, "sandbox: run ended", attrs...)
}

// ownerLogs holds the Logger of each Sandbox that has one, by its owner
// name, so that what the spawner reports about a Sandbox's runs and pool
// reaches that Sandbox's Logger.
var ownerLogs sync.Map // owner name -> *slog.Logger

// spawnerWarning logs a warning the spawner sent about owner's runs, or,
// when owner is empty, about itself, to every Logger.
func spawnerWarning(owner, text string, pid int) {
	ownerLogs.Range(func(name, log any) bool {
		if owner == "" || name == owner {
			log.(*slog.Logger).Warn("sandbox: "+text, "spawner", pid)
		}
		return true
	})
}
