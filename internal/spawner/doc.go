// Package spawner is the code of the spawner process: the caller's binary
// re-exec'd once per caller process (the sandbox package's re-exec hook
// calls Main), small and before it holds any of the caller's heap. It
// starts every sandbox of the caller's but an InProcess Sandbox's, through
// internal/launch, and keeps their pools of prepared sandboxes
// (Pool). The sandboxes' inits are its children, not the
// caller's, so a start costs the same whatever the caller's size, also
// where the init cannot share the memory of the process that clones it
// and the clone copies its page tables (forkplan.SharesMemory).
//
// It speaks internal/wire's Request and Reply with the caller; the
// caller's side is the sandbox package's spawnerclient_linux.go.
//
//   - spawner_linux.go: Main, and the server of one caller: a method per
//     kind of request (wire.RequestKind), and the report of one run
//   - pool_linux.go: an owner (one Sandbox of the caller): its pool and the
//     teardown of its runs
package spawner
