// Package wire holds every message that crosses a process boundary in a
// sandbox's life, and the sequence each goes in. Both ends of each are the
// same binary, so JSON is enough where a message is structured.
//
// The processes: the caller (a program that imports the sandbox package),
// its spawner and its workspace keepers (the caller's binary re-exec'd,
// never inside a sandbox), each sandbox's init (a child cloned without a
// Go runtime that runs a plan; internal/recipe), and the program. The
// launcher is whoever clones an init: the spawner, or the caller itself
// for an InProcess Sandbox.
//
// One run through the spawner, with the files of each message:
//
//	caller                    spawner (launcher)              init                        program
//	keeper: KeeperMount → ← detached workspace mount (a session; keeper.go)
//	Request{Start, Spec,   →  Accepted                                                    (spawner.go)
//	  Program}
//	  + stdio, proxy channel,
//	  workspace mount
//	                          plan, clone               →  places its fds
//	                                                    ←  sync: "I run"                  (init.go)
//	                          id maps, cgroup
//	                          sync: "go on"             →  becomes the sandbox user,
//	                                                       builds the sandbox
//	  proxy listener  ←─────────────────────────────────   ProxyMark (Egress; proxy.go)
//	                                                    ←  TerminalMark + master (Terminal)
//	                                                    ←  ListenerMark + listener, or ExecMark
//	                                                       filter, execve(exec shim)   →  execve(program)
//	                                                    ←  EOF: the program runs
//	                     ←   Started (+ master)
//	                          (or Failed + SetupError   ←  failure record)
//	Request{Kill} (ctx)   →  kills the init
//	                          wait4                    ←  the init (the program) exits
//	                     ←   Exited{Exit}
//
// A prepared init (the spawner's pool) stops after building the sandbox,
// sends PreparedMark, and waits on its sync socket for its Program, which
// the spawner sends when a Request{Start, Spec, Program} takes it (init.go). An
// InProcess caller is its own launcher: no Request or Reply is sent, and
// the rest is the same.
package wire
