// Package netns builds and removes the kernel side of a rocelab lab: one Linux network
// namespace per emulated host, a TAP netdev in each (the host's view of its NIC), the
// addresses, routes and static neighbours on it, and the record that lets `rocelab down`
// and `rocelab clean` remove exactly what a lab created and nothing else.
//
// # Naming and tagging
//
// Everything rocelab creates is tagged twice:
//
//   - by name: a host's namespace is "rl-<lab>-<host>" (see [NamespaceName]) and its TAP
//     is "rl-<host>", cut to fit IFNAMSIZ (see [TapName]);
//   - by record: the lab's state file, <root>/<lab>/state.json (see [DefaultStore]), lists
//     the namespaces, devices, sockets and processes of the lab.
//
// Removal trusts only the record. A namespace named like ours that no state file lists
// is reported by [Cleaner.Clean], never deleted: someone else may own it.
//
// # Record before create
//
// Whoever builds a lab writes the state file (with its own [Process] as owner) before
// it creates anything, and records each object before creating it ([AddHost] does).
// A crash therefore leaves at most a record of something that does not exist, which
// removal tolerates, and never an object nobody recorded.
//
// # Removal
//
// [Cleaner.Down] removes one lab (`rocelab down`); [Cleaner.Clean] removes every lab
// whose lab process is gone (`rocelab clean`). Processes are identified by pid and
// start time, so a reused pid is never taken for a lab's.
//
// # Host views
//
// [CreateHostView] gives a host mount and UTS namespaces of its own, pinned under
// [ViewDir]: its hostname, /etc/hosts, a sysfs of its network namespace and rxe-like RDMA
// device files, so that programs looking at the machine (UCX, MPI, rdma-core's tests)
// find the host as a machine with an RDMA device. [Store.Exec] enters them; removal
// unpins them with the host's namespace.
//
// # Threads and namespaces
//
// A network namespace belongs to an OS thread, not to a goroutine or a process. [Do]
// runs a function on a dedicated, locked thread switched into the namespace; goroutines
// that function starts run on other threads, in the namespace the process started in.
// Sockets and TAP fds keep the namespace they were created in, so the usual pattern is to
// create them inside [Do] and use them anywhere.
package netns
