// File: devlet/alloc_cli/cli.h
//
// The devlet-alloc command (DESIGN.md §5), also installed as the kubectl plugin kubectl-devlet:
// objects from files (and, with a cluster, from the kube-apiserver) in, allocations or the reasons
// why not out. main.cc is only RunDevletAlloc; the allocator library holds none of the command.
#pragma once

namespace devlet::alloc_cli {

// RunDevletAlloc is the devlet-alloc command. Returns the exit code: 0 allocated, 1 cannot be
// allocated on that node (also: the search ran out of --timeout), 2 error. `-f -` reads std::cin.
int RunDevletAlloc(int argc, char** argv);

}  // namespace devlet::alloc_cli
