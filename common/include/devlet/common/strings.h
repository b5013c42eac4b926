// File: devlet/common/strings.h
//
// Text helpers shared by every module. Kubernetes components are written in Go, and users compare
// our messages and logs with theirs, so strings we show quoted are quoted the way Go's
// strconv.Quote (`%q`) does:
//
//   errors.push_back("unknown device " + GoQuote(name));  // unknown device "gpu\n0"
#pragma once

#include <string>
#include <string_view>

namespace devlet {

// AppendGoQuoted appends `text` to `out` as Go's strconv.Quote writes it: double quotes, `\"` and
// `\\`, the C escapes Go uses (`\a \b \f \n \r \t \v`), other ASCII control bytes and DEL as
// `\xNN`, valid multi-byte UTF-8 kept as is and bytes that are not valid UTF-8 as `\xNN`.
// (Go also escapes non-printable Unicode runes as `\uNNNN`; we keep them, which only matters for
// text no Kubernetes object name can contain.)
void AppendGoQuoted(std::string& out, std::string_view text);

// GoQuote returns `text` quoted as AppendGoQuoted writes it.
std::string GoQuote(std::string_view text);

}  // namespace devlet
