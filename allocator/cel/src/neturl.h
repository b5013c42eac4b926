// Private: URLs as Go's net/url parses them (Go 1.26: strict colons in http/https hosts), for the
// Kubernetes libraries that call it: the format library's `uri` format (url.ParseRequestURI's
// error text) and the URL library (url.ParseRequestURI, then url.Parse).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devlet::cel::internal {

// GoUrl holds the fields of Go's url.URL that parsing fills in.
struct GoUrl {
  std::string scheme;  // lower-cased
  std::string opaque;  // "scheme:opaque" URLs (no leading '/' after the scheme)
  bool has_user = false;
  std::string username;  // unescaped
  bool has_password = false;
  std::string password;  // unescaped
  std::string host;      // unescaped host[:port]; IPv6 literals keep their brackets
  // "scheme:/path": a scheme and a rooted path but no authority (String omits the "//").
  bool omit_host = false;
  std::string path;      // unescaped
  // The path as written (still escaped): Go keeps it as RawPath when escaping `path` again gives
  // a different text (URL.EscapedPath decides between the two).
  std::string escaped_path;
  std::string raw_query;  // without the '?'
  bool force_query = false;
  std::string fragment;  // unescaped (url.Parse only)
  std::string raw_fragment;
};

// ParseRequestUri is url.ParseRequestURI: an absolute URI or an absolute path, no fragment
// handling. On failure returns false and sets *error to Go's *url.Error text, e.g.
// `parse "x": invalid URI for request`.
bool ParseRequestUri(std::string_view raw, GoUrl* out, std::string* error);

// ParseUrl is url.Parse: the fragment is cut off first; relative references are allowed.
bool ParseUrl(std::string_view raw, GoUrl* out, std::string* error);

// The accessors of Go's url.URL that Kubernetes' URL library calls.

// EscapedPath is URL.EscapedPath: the path as written when that is a valid escaping of the
// decoded path, otherwise the decoded path escaped again.
std::string EscapedPath(const GoUrl& u);
// Hostname is URL.Hostname: the host without a valid (numeric) port and without brackets.
std::string_view Hostname(const GoUrl& u);
// Port is URL.Port: the digits after the host's last colon, or empty.
std::string_view Port(const GoUrl& u);
// UrlString is URL.String: the URL written out again (used for equality).
std::string UrlString(const GoUrl& u);

// QueryValues is URL.Query: keys in the order of their first occurrence, each with its values
// in order; pairs that url.ParseQuery rejects (a bad escape, a ';') are dropped, as Query does.
using QueryValues = std::vector<std::pair<std::string, std::vector<std::string>>>;
QueryValues ParseQuery(std::string_view raw_query);

}  // namespace devlet::cel::internal
