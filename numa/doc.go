// Package numa reads the NUMA nodes and the CPU topology under a root
// directory: <root>/sys/devices/system/node (nodes, their CPU lists,
// memory and distances), <root>/sys/devices/system/cpu (online and offline
// CPUs, cores, SMT siblings, sockets), <root>/proc/self/status (the CPUs
// this process may use) and <root>/proc/cpuinfo (vendor, family, model).
//
// It hands plain values up (Topology) and never imports the model.
// Problems with one node or CPU are returned in an error list naming the
// file and the reader goes on; a kernel without NUMA directories yields one
// node 0 holding every online CPU, with an error saying so.
//
// It reads sysfs directly rather than through ghw: ghw logs and drops a
// node whose files are missing (a thin or damaged tree silently loses
// nodes), has no notion of offline CPUs, allowed CPUs or memory-only
// nodes, and reads every cache file, which costs more than the whole
// discovery budget.
package numa
