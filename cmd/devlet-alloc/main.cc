// devlet-alloc: the structured allocator as a command (DESIGN.md §5).
#include "devlet/alloc_cli/cli.h"

int main(int argc, char** argv) { return devlet::alloc_cli::RunDevletAlloc(argc, argv); }
