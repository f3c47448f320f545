package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fumehood/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The tools' inputs. Their JSON schemas, which the client shows the
// model, come from these types and their jsonschema descriptions; a field
// with omitempty is optional.

type runInput struct {
	Argv           []string `json:"argv,omitempty" jsonschema:"the program and its arguments, e.g. [\"ls\", \"-l\"]; give argv or shell, not both"`
	Shell          string   `json:"shell,omitempty" jsonschema:"a shell command line, run with sh -c, e.g. \"ls -l | wc -l\"; give argv or shell, not both"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text for the program's standard input (default: none)"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"kill the run after this many seconds"`
}

type runCodeInput struct {
	Language       string  `json:"language" jsonschema:"the language of code: python (python3), node, or shell (sh)"`
	Code           string  `json:"code" jsonschema:"the program's source text"`
	Stdin          string  `json:"stdin,omitempty" jsonschema:"text for the program's standard input (default: none)"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"kill the run after this many seconds"`
}

type pathInput struct {
	Path string `json:"path" jsonschema:"a path in the workspace, relative to /workspace (e.g. src/main.py) or absolute beneath it"`
}

type listInput struct {
	Path string `json:"path,omitempty" jsonschema:"a directory in the workspace, relative to /workspace (default: the workspace itself)"`
}

type writeInput struct {
	Path       string `json:"path" jsonschema:"a path in the workspace, relative to /workspace (e.g. src/main.py) or absolute beneath it; missing directories are made"`
	Content    string `json:"content" jsonschema:"the file's new content"`
	Encoding   string `json:"encoding,omitempty" jsonschema:"how content is written: utf-8 (the default) or base64, for bytes that are not text"`
	Executable bool   `json:"executable,omitempty" jsonschema:"make the file executable (mode 0755 instead of 0644)"`
}

type snapshotInput struct {
	Name string `json:"name,omitempty" jsonschema:"a name to restore it by later; one is made up if empty, and a snapshot of the same name is replaced"`
}

type restoreInput struct {
	Snapshot string `json:"snapshot" jsonschema:"the name the snapshot tool returned"`
}

type emptyInput struct{}

type signalInput struct {
	Pid    int    `json:"pid" jsonschema:"the process id inside the sandbox, as list_processes shows it"`
	Signal string `json:"signal,omitempty" jsonschema:"TERM (the default), KILL, INT, HUP, QUIT, USR1, USR2, STOP or CONT"`
}

// The tools' outputs, besides runOutput (mcp_result.go).

type fileOutput struct {
	Path     string `json:"path" jsonschema:"the path as given"`
	Size     int64  `json:"size" jsonschema:"the file's size in bytes"`
	Content  string `json:"content,omitempty" jsonschema:"the file's content, as encoding says"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8, or base64 for content that is not valid UTF-8"`
}

type listOutput struct {
	Path    string      `json:"path"`
	Entries []entryInfo `json:"entries"`
}

type entryInfo struct {
	Name   string `json:"name"`
	Type   string `json:"type" jsonschema:"file, dir, symlink or other"`
	Size   int64  `json:"size" jsonschema:"bytes, for a file"`
	Mode   string `json:"mode" jsonschema:"permission bits in octal, e.g. 0644"`
	Target string `json:"target,omitempty" jsonschema:"a symlink's target"`
}

type snapshotOutput struct {
	Snapshot string `json:"snapshot" jsonschema:"the name to give restore"`
}

type okOutput struct {
	Done string `json:"done" jsonschema:"what was done"`
}

type startOutput struct {
	Pid  int      `json:"pid" jsonschema:"its process id inside the sandbox, for signal_process"`
	Argv []string `json:"argv"`
}

type processesOutput struct {
	Processes  []processInfo    `json:"processes" jsonschema:"every process alive in the session's sandbox"`
	Background []backgroundInfo `json:"background" jsonschema:"the processes start_process started, running or not, with the end of their output"`
}

type processInfo struct {
	Pid      int      `json:"pid"`
	PPid     int      `json:"ppid" jsonschema:"its parent's pid; 0 for a process a call started"`
	Args     []string `json:"args"`
	State    string   `json:"state" jsonschema:"running, sleeping, stopped, zombie, ..."`
	CPUMS    int64    `json:"cpu_ms" jsonschema:"CPU time used, in milliseconds"`
	RSSBytes int64    `json:"rss_bytes"`
}

type backgroundInfo struct {
	Pid             int        `json:"pid"`
	Argv            []string   `json:"argv"`
	Running         bool       `json:"running"`
	Stdout          string     `json:"stdout" jsonschema:"the last bytes it wrote"`
	Stderr          string     `json:"stderr"`
	StdoutTruncated bool       `json:"stdout_truncated" jsonschema:"it wrote more than is kept"`
	StderrTruncated bool       `json:"stderr_truncated"`
	Result          *runOutput `json:"result,omitempty" jsonschema:"how it ended, once it has"`
}

type signalOutput struct {
	Pid    int    `json:"pid"`
	Signal string `json:"signal"`
}

// languages maps run_code's languages to their interpreters' argv, before
// the code.
var languages = map[string][]string{
	"python": {"python3", "-c"},
	"node":   {"node", "-e"},
	"shell":  {"sh", "-c"},
}

// addTools registers the tools; the live ones only with --live, as a
// tool the session cannot serve would only cost the model a call.
func (srv *mcpServer) addTools() {
	timeoutDesc := fmt.Sprintf("kill the run after this many seconds (default %g, at most %g)",
		srv.cfg.timeout.Seconds(), srv.cfg.maxTimeout.Seconds())
	live := ""
	if srv.cfg.live {
		live = " Processes a command leaves running in the background keep running after the call."
	}
	reshapeLive := ""
	if srv.cfg.live {
		reshapeLive = " It ends every process running in the session's sandbox (the next call starts it anew)."
	}
	changes := " The result lists the workspace files the run added, modified and deleted."
	if srv.cfg.live {
		changes = ""
	}
	addTool(srv, &mcp.Tool{Name: "run", Title: "Run a command",
		Description: "Run a command in the session's Linux sandbox, with /workspace as its working directory, and wait for it to end. " +
			"Give argv (no shell) or shell (a command line for sh -c). The result has its stdout, stderr, exit code and how it ended; " +
			"a non-zero exit, a timeout or a kill is an error result." + changes + live},
		withSession(srv, srv.runTool), func(s *jsonschema.Schema) { s.Properties["timeout_seconds"].Description = timeoutDesc })
	addTool(srv, &mcp.Tool{Name: "run_code", Title: "Run a code snippet",
		Description: "Run a snippet of python (python3), node or shell (sh) code in the session's sandbox, in /workspace, and wait for it to end. " +
			"The interpreter must be installed in the sandbox's root. The result is run's." + changes},
		withSession(srv, srv.runCodeTool), func(s *jsonschema.Schema) {
			s.Properties["timeout_seconds"].Description = timeoutDesc
			s.Properties["language"].Enum = []any{"python", "node", "shell"}
		})
	addTool(srv, &mcp.Tool{Name: "read_file", Title: "Read a workspace file",
		Description: fmt.Sprintf("Read a file of the session's /workspace, up to %s. Content that is not UTF-8 text comes base64-encoded.", formatSize(srv.cfg.outputLimit)),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		withSession(srv, srv.readFileTool), nil)
	addTool(srv, &mcp.Tool{Name: "write_file", Title: "Write a workspace file",
		Description: "Write a file in the session's /workspace, replacing it if it exists and making missing directories."},
		withSession(srv, srv.writeFileTool), func(s *jsonschema.Schema) { s.Properties["encoding"].Enum = []any{"utf-8", "base64"} })
	addTool(srv, &mcp.Tool{Name: "list_files", Title: "List a workspace directory",
		Description: "List a directory of the session's /workspace: each entry's name, type, size and mode.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		withSession(srv, srv.listFilesTool), nil)
	addTool(srv, &mcp.Tool{Name: "delete_file", Title: "Delete a workspace file or directory",
		Description: "Delete a file, or a directory and everything in it, from the session's /workspace."},
		withSession(srv, srv.deleteFileTool), nil)
	addTool(srv, &mcp.Tool{Name: "snapshot", Title: "Snapshot the workspace",
		Description: "Keep the session's /workspace as it is now, under a name that restore takes. Cheap: nothing is copied." + reshapeLive},
		withSession(srv, srv.snapshotTool), nil)
	addTool(srv, &mcp.Tool{Name: "restore", Title: "Restore a snapshot",
		Description: "Make the session's /workspace what a snapshot kept: files added since are gone, deleted ones back." + reshapeLive},
		withSession(srv, srv.restoreTool), nil)
	addTool(srv, &mcp.Tool{Name: "reset", Title: "Reset the workspace",
		Description: "Empty the session's /workspace; snapshots are kept." + reshapeLive},
		withSession(srv, srv.resetTool), nil)
	if !srv.cfg.live {
		return
	}
	addTool(srv, &mcp.Tool{Name: "start_process", Title: "Start a background process",
		Description: "Start a command in the session's sandbox and return at once with its pid: a server, a watcher, anything that runs on. " +
			"It keeps running until it exits, is signalled or the session ends; list_processes shows the end of its output. " +
			"Give argv or shell, as run takes them."},
		withSession(srv, srv.startProcessTool), func(s *jsonschema.Schema) { delete(s.Properties, "timeout_seconds") })
	addTool(srv, &mcp.Tool{Name: "list_processes", Title: "List processes",
		Description: "List the processes alive in the session's sandbox, and those start_process started with the end of their output and, once they ended, how.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		withSession(srv, srv.listProcessesTool), nil)
	addTool(srv, &mcp.Tool{Name: "signal_process", Title: "Signal a process",
		Description: "Send a signal to a process in the session's sandbox, by the pid list_processes shows: TERM (the default) asks it to end, KILL ends it."},
		withSession(srv, srv.signalProcessTool), nil)
}

// addTool adds a tool whose input schema is In's, changed by edit, and
// whose output schema is Out's as it serialises (outputSchemas).
func addTool[In, Out any](srv *mcpServer, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], edit func(*jsonschema.Schema)) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		if srv.err == nil {
			srv.err = fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		return
	}
	if edit != nil {
		edit(schema)
	}
	t.InputSchema = schema
	out := reflect.TypeFor[Out]()
	if out.Kind() == reflect.Pointer {
		out = out.Elem()
	}
	if out.Kind() == reflect.Struct {
		opts, err := outputSchemas()
		if err == nil {
			t.OutputSchema, err = jsonschema.ForType(out, opts)
		}
		if err != nil {
			if srv.err == nil {
				srv.err = fmt.Errorf("tool %s: output schema: %w", t.Name, err)
			}
			return
		}
	}
	mcp.AddTool(srv.server, t, h)
}

// timeoutOf is the timeout a call asked for, or --timeout.
func (srv *mcpServer) timeoutOf(seconds float64) (time.Duration, error) {
	switch {
	case seconds == 0:
		return srv.cfg.timeout, nil
	case seconds < 0 || math.IsNaN(seconds):
		return 0, fmt.Errorf("timeout_seconds %g: must be more than 0", seconds)
	case seconds > srv.cfg.maxTimeout.Seconds():
		return 0, fmt.Errorf("timeout_seconds %g: more than the %g this server allows (--max-timeout)", seconds, srv.cfg.maxTimeout.Seconds())
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// commandOf makes the Cmd of argv or a shell line.
func commandOf(argv []string, shell string) (*sandbox.Cmd, error) {
	switch {
	case len(argv) > 0 && shell != "":
		return nil, errors.New("give argv or shell, not both")
	case len(argv) > 0:
		if argv[0] == "" {
			return nil, errors.New("argv[0], the program, is empty")
		}
		return sandbox.Command(argv[0], argv[1:]...), nil
	case shell != "":
		return sandbox.Command("sh", "-c", shell), nil
	}
	return nil, errors.New("no command: give argv (the program and its arguments) or shell (a command line for sh -c)")
}

func (srv *mcpServer) runTool(ctx context.Context, s *mcpSession, in runInput) (*mcp.CallToolResult, *runOutput, error) {
	cmd, err := commandOf(in.Argv, in.Shell)
	if err != nil {
		return nil, nil, err
	}
	return srv.runCmd(ctx, s, cmd, in.Stdin, in.TimeoutSeconds, "")
}

func (srv *mcpServer) runCodeTool(ctx context.Context, s *mcpSession, in runCodeInput) (*mcp.CallToolResult, *runOutput, error) {
	argv, ok := languages[in.Language]
	if !ok {
		return nil, nil, fmt.Errorf("unknown language %q: give python, node or shell", in.Language)
	}
	if in.Code == "" {
		return nil, nil, fmt.Errorf("no code: give the %s program to run", in.Language)
	}
	cmd := sandbox.Command(argv[0], append(argv[1:], in.Code)...)
	return srv.runCmd(ctx, s, cmd, in.Stdin, in.TimeoutSeconds, in.Language)
}

// runCmd runs cmd in the session and makes its result. language, for
// run_code, names what a missing interpreter was for.
func (srv *mcpServer) runCmd(ctx context.Context, s *mcpSession, cmd *sandbox.Cmd, stdin string, seconds float64, language string) (*mcp.CallToolResult, *runOutput, error) {
	timeout, err := srv.timeoutOf(seconds)
	if err != nil {
		return nil, nil, err
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := s.sb.Run(ctx, cmd)
	switch {
	case errors.Is(err, sandbox.ErrNotFound) && language != "":
		return nil, nil, fmt.Errorf("language %s needs %s, which is not installed in the sandbox's root (not found on its PATH)", language, cmd.Path)
	case errors.Is(err, sandbox.ErrNotFound):
		return nil, nil, fmt.Errorf("%s: not found in the sandbox (a name is looked up on the sandbox's PATH; give a path to run a file)", cmd.Path)
	case err != nil:
		return nil, nil, srv.cfg.cfg.explain(err)
	}
	out := newRunOutput(res, timeout, tracksChanges(srv.cfg.cfg.opts))
	switch m := srv.cfg.cfg.opts.Limits.Memory; {
	case m == 0:
		out.memory = sandbox.DefaultMemory
	case m > 0:
		out.memory = m
	}
	return &mcp.CallToolResult{IsError: !res.Success(), Content: []mcp.Content{&mcp.TextContent{Text: out.summary(srv.cfg)}}}, out, nil
}

func (srv *mcpServer) readFileTool(ctx context.Context, s *mcpSession, in pathInput) (*mcp.CallToolResult, *fileOutput, error) {
	st, err := s.sb.Stat(in.Path)
	if err != nil {
		return nil, nil, fileErr(err)
	}
	switch {
	case st.Mode.IsDir():
		return nil, nil, fmt.Errorf("%s is a directory: list it with list_files", in.Path)
	case !st.Mode.IsRegular() && st.Mode&fs.ModeSymlink == 0:
		return nil, nil, fmt.Errorf("%s is not a regular file (%s)", in.Path, st.Mode.Type())
	case st.Size > srv.cfg.outputLimit:
		return nil, nil, fmt.Errorf("%s is %d bytes, more than the %d this tool returns (--output-limit): read a part of it with run, e.g. head -c or sed -n",
			in.Path, st.Size, srv.cfg.outputLimit)
	}
	data, err := s.sb.ReadFile(in.Path)
	if err != nil {
		return nil, nil, fileErr(err)
	}
	if int64(len(data)) > srv.cfg.outputLimit {
		return nil, nil, fmt.Errorf("%s grew to %d bytes as it was read, more than the %d this tool returns", in.Path, len(data), srv.cfg.outputLimit)
	}
	out := &fileOutput{Path: in.Path, Size: int64(len(data)), Content: string(data), Encoding: "utf-8"}
	if !utf8.Valid(data) {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.Content}}}, out, nil
}

func (srv *mcpServer) writeFileTool(ctx context.Context, s *mcpSession, in writeInput) (*mcp.CallToolResult, *fileOutput, error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, nil, fmt.Errorf("content is not base64, as encoding says: %v", err)
		}
	default:
		return nil, nil, fmt.Errorf("unknown encoding %q: give utf-8 or base64", in.Encoding)
	}
	perm := fs.FileMode(0o644)
	if in.Executable {
		perm = 0o755
	}
	if err := s.sb.WriteFile(in.Path, data, perm); err != nil {
		return nil, nil, fileErr(err)
	}
	out := &fileOutput{Path: in.Path, Size: int64(len(data))}
	return textResult(fmt.Sprintf("wrote %s (%d bytes)", in.Path, len(data))), out, nil
}

func (srv *mcpServer) listFilesTool(ctx context.Context, s *mcpSession, in listInput) (*mcp.CallToolResult, *listOutput, error) {
	dir := in.Path
	if dir == "" {
		dir = "."
	}
	es, err := s.sb.ReadDir(dir)
	if err != nil {
		return nil, nil, fileErr(err)
	}
	out := &listOutput{Path: dir, Entries: []entryInfo{}}
	var text strings.Builder
	for _, e := range es {
		typ := "other"
		switch {
		case e.Mode.IsRegular():
			typ = "file"
		case e.Mode.IsDir():
			typ = "dir"
		case e.Mode&fs.ModeSymlink != 0:
			typ = "symlink"
		}
		out.Entries = append(out.Entries, entryInfo{Name: e.Name, Type: typ, Size: e.Size,
			Mode: fmt.Sprintf("%04o", e.Mode.Perm()), Target: e.Target})
		fmt.Fprintf(&text, "%s %s %d %s", typ, fmt.Sprintf("%04o", e.Mode.Perm()), e.Size, e.Name)
		if e.Target != "" {
			fmt.Fprintf(&text, " -> %s", e.Target)
		}
		text.WriteByte('\n')
	}
	if len(es) == 0 {
		text.WriteString(dir + " is empty\n")
	}
	return textResult(text.String()), out, nil
}

func (srv *mcpServer) deleteFileTool(ctx context.Context, s *mcpSession, in pathInput) (*mcp.CallToolResult, *okOutput, error) {
	// RemoveAll takes a missing path for done; the model is told instead.
	e, err := s.sb.Stat(in.Path)
	if err != nil {
		return nil, nil, fileErr(err)
	}
	if e.Name == "." {
		// RemoveAll would empty the workspace: a tool for that is reset.
		return nil, nil, fileErr(fmt.Errorf("delete %s: names the workspace itself (reset empties it): %w", in.Path, sandbox.ErrOutsideWorkspace))
	}
	if err := s.sb.RemoveAll(in.Path); err != nil {
		return nil, nil, fileErr(err)
	}
	done := "deleted " + in.Path
	return textResult(done), &okOutput{Done: done}, nil
}

func (srv *mcpServer) snapshotTool(ctx context.Context, s *mcpSession, in snapshotInput) (*mcp.CallToolResult, *snapshotOutput, error) {
	name, err := s.snapshot(in.Name)
	if err != nil {
		return nil, nil, fileErr(err)
	}
	return textResult("snapshot " + name + " taken"), &snapshotOutput{Snapshot: name}, nil
}

func (srv *mcpServer) restoreTool(ctx context.Context, s *mcpSession, in restoreInput) (*mcp.CallToolResult, *okOutput, error) {
	snap, err := s.snapshotNamed(in.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	if err := s.sb.Restore(snap); err != nil {
		return nil, nil, fileErr(err)
	}
	done := "workspace restored to snapshot " + in.Snapshot
	return textResult(done), &okOutput{Done: done}, nil
}

func (srv *mcpServer) resetTool(ctx context.Context, s *mcpSession, in emptyInput) (*mcp.CallToolResult, *okOutput, error) {
	if err := s.sb.Reset(); err != nil {
		return nil, nil, fileErr(err)
	}
	done := "workspace emptied"
	return textResult(done), &okOutput{Done: done}, nil
}

func (srv *mcpServer) startProcessTool(ctx context.Context, s *mcpSession, in runInput) (*mcp.CallToolResult, *startOutput, error) {
	cmd, err := commandOf(in.Argv, in.Shell)
	if err != nil {
		return nil, nil, err
	}
	if in.Stdin != "" {
		cmd.Stdin = strings.NewReader(in.Stdin)
	}
	b, err := s.startBackground(cmd)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return nil, nil, fmt.Errorf("%s: not found in the sandbox (a name is looked up on the sandbox's PATH; give a path to run a file)", cmd.Path)
	case err != nil:
		return nil, nil, srv.cfg.cfg.explain(err)
	}
	out := &startOutput{Pid: b.pid, Argv: b.argv}
	return textResult(fmt.Sprintf("started pid %d: %s", b.pid, strings.Join(b.argv, " "))), out, nil
}

func (srv *mcpServer) listProcessesTool(ctx context.Context, s *mcpSession, in emptyInput) (*mcp.CallToolResult, *processesOutput, error) {
	ps, err := s.sb.Processes(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := &processesOutput{Processes: []processInfo{}, Background: []backgroundInfo{}}
	var text strings.Builder
	for _, p := range ps {
		out.Processes = append(out.Processes, processInfo{Pid: p.Pid, PPid: p.PPid, Args: p.Args, State: p.State,
			CPUMS: p.CPU.Milliseconds(), RSSBytes: p.RSS})
		fmt.Fprintf(&text, "pid %d (parent %d) %s: %s\n", p.Pid, p.PPid, p.State, strings.Join(p.Args, " "))
	}
	if len(ps) == 0 {
		text.WriteString("no process is running\n")
	}
	for _, b := range s.backgroundList() {
		info := backgroundInfo{Pid: b.pid, Argv: b.argv}
		info.Stdout, info.StdoutTruncated = b.stdout.tail()
		info.Stderr, info.StderrTruncated = b.stderr.tail()
		b.mu.Lock()
		info.Running = !b.ended
		if b.ended && b.res != nil {
			info.Result = newRunOutput(b.res, 0, false)
		}
		if b.ended && b.err != nil {
			info.Result = &runOutput{Error: b.err.Error()}
		}
		b.mu.Unlock()
		state := "running"
		if info.Result != nil {
			state = info.Result.ending()
		}
		fmt.Fprintf(&text, "background pid %d (%s): %s\n", b.pid, state, strings.Join(b.argv, " "))
		if info.Stdout != "" {
			fmt.Fprintf(&text, "  stdout (its end): %s\n", strings.TrimRight(info.Stdout, "\n"))
		}
		if info.Stderr != "" {
			fmt.Fprintf(&text, "  stderr (its end): %s\n", strings.TrimRight(info.Stderr, "\n"))
		}
		out.Background = append(out.Background, info)
	}
	return textResult(text.String()), out, nil
}

// signalNames are the signals signal_process takes.
var signalNames = map[string]syscall.Signal{
	"TERM": unix.SIGTERM, "KILL": unix.SIGKILL, "INT": unix.SIGINT, "HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT,
	"USR1": unix.SIGUSR1, "USR2": unix.SIGUSR2, "STOP": unix.SIGSTOP, "CONT": unix.SIGCONT,
}

func (srv *mcpServer) signalProcessTool(ctx context.Context, s *mcpSession, in signalInput) (*mcp.CallToolResult, *signalOutput, error) {
	name := strings.TrimPrefix(strings.ToUpper(in.Signal), "SIG")
	if name == "" {
		name = "TERM"
	}
	sig, ok := signalNames[name]
	if !ok {
		return nil, nil, fmt.Errorf("unknown signal %q: give TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP or CONT", in.Signal)
	}
	if err := s.sb.Signal(in.Pid, sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil, nil, fmt.Errorf("no process %d in the session's sandbox: it has ended, or never was (list_processes shows what runs)", in.Pid)
		}
		return nil, nil, err
	}
	out := &signalOutput{Pid: in.Pid, Signal: "SIG" + name}
	return textResult(fmt.Sprintf("sent SIG%s to pid %d", name, in.Pid)), out, nil
}

// fileErr says what a workspace operation's error means for the model.
func fileErr(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrOutsideWorkspace):
		return fmt.Errorf("%v: paths are relative to /workspace, or absolute beneath it, and may not leave it", err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%v: no such file in the workspace (list_files shows what is there)", err)
	}
	return err
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
