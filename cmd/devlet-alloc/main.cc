// devlet-alloc: the structured allocator as a command (DESIGN.md §5).
#include "devlet/allocator/scenario.h"

int main(int argc, char** argv) { return devlet::allocator::RunDevletAlloc(argc, argv); }
