// Package seccompprofile reads seccomp profiles in the OCI runtime-spec
// shape (specs.LinuxSeccomp) and Docker's JSON format into a
// [sandbox.SeccompPolicy], and writes a policy back as an OCI profile.
//
// A profile means what runc with libseccomp makes of it, with these
// differences, each the stricter reading or one the sandbox needs:
//
//   - SCMP_ACT_ERRNO reports the refusal ([sandbox.ActNotify]): the program
//     sees the errno it would under runc, and the Result counts it.
//   - A syscall's conditional rules apply before its unconditional one,
//     also when they carry the default action. libseccomp (2.5) drops the
//     conditional rules of a syscall that has an unconditional rule, and
//     runc drops every rule whose action is the default, so that under
//     runc "ioctl(TIOCSTI) fails, other ioctls are allowed" allows every
//     ioctl; here TIOCSTI fails, as the profile's author meant.
//   - Syscalls of other architectures than this host's are killed, also
//     when the profile lists those architectures (SCMP_ARCH_X86 and
//     SCMP_ARCH_X32 beside SCMP_ARCH_X86_64, say): a sandbox filters one
//     ABI, and a 32-bit program in it dies at its first syscall.
//   - Numbers this architecture's syscall table does not know get Unknown:
//     ENOSYS, reported, under a default that fails with an errno (runc
//     answers ENOSYS above the highest syscall the profile names), and the
//     default itself otherwise (runc gives ENOSYS under a kill default too).
package seccompprofile
