// Package bind applies a CPU and memory binding to the calling process and
// replaces it with a command: the system calls behind `gpuaffinity exec`
// (sched_getaffinity, sched_setaffinity, set_mempolicy, get_mempolicy,
// execve). It is the only package that makes these calls; it computes
// nothing (the binding map is package binding's) and reads only the live
// machine.
//
// Affinity and memory policy are attributes of a thread, not of a process:
// sched_setaffinity(0, …) and set_mempolicy(…) change the calling thread
// only. A Go program runs on several threads, so Exec locks its goroutine
// to one thread, binds that thread and calls execve on it. execve(2) then
// ends every other thread of the process and gives the new program a
// single thread, the one that called it, which keeps its affinity mask
// (sched_setaffinity(2): "preserved across an execve") and its memory
// policy (set_mempolicy(2): "preserved across an execve"). The other
// threads' masks therefore never reach the command, and every thread and
// child the command starts inherits the bound one's. No child process is
// made: the command keeps gpuaffinity's pid, so signals sent to it and its
// exit status are the command's own.
package bind
