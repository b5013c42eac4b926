// Syntax-error texts as Kubernetes reports them (cel-go's ANTLR-generated lexer and parser).
#pragma once

#include <string>
#include <string_view>

namespace devlet::cel::internal {

// CelGoSyntaxErrors re-reads `source` the way cel-go's ANTLR lexer and parser read it, with
// ANTLR's default error strategy (single-token deletion and insertion, resynchronisation, errors
// suppressed while recovering) and cel-go's limits, and returns the error text cel-go shows:
// every "Syntax error: ..." line (with source snippet and caret), the "reserved identifier" and
// literal errors its visitor adds to the recovered tree, sorted by position as cel-go sorts them.
// Returns an empty string when the ANTLR grammar accepts the input (the caller's own error, if
// any, is then the right one). Only the error path calls this: it scans the input again.
std::string CelGoSyntaxErrors(std::string_view source);

}  // namespace devlet::cel::internal
