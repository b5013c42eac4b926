// Go's net/url parsing (url.Parse, url.ParseRequestURI) with its error texts; see neturl.h.
#include "neturl.h"

#include <string>
#include <string_view>
#include <unordered_map>

#include "netip.h"

namespace devlet::cel::internal {
namespace {

// The unescaping modes of net/url that parsing uses.
enum class Mode { kPath, kHost, kZone, kUserPassword, kQueryComponent, kFragment };

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int Unhex(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return c - 'A' + 10;
}

// The ASCII bytes a host (or IPv6 zone) may contain unescaped (net/url's encoding table).
bool HostByte(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  constexpr std::string_view kExtra = "!\"$&'()*+,-.:;<=>[]_~";
  return kExtra.find(static_cast<char>(c)) != std::string_view::npos;
}

// net/url's unescape: %XX decoding with the per-mode checks. On failure *error is the Go error
// text (EscapeError or InvalidHostError).
bool Unescape(std::string_view s, Mode mode, std::string* out, std::string* error) {
  const bool host_like = mode == Mode::kHost || mode == Mode::kZone;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '%') {
      if (i + 2 >= s.size() || !IsHex(s[i + 1]) || !IsHex(s[i + 2])) {
        *error = "invalid URL escape " + GoQuote(s.substr(i, 3));
        return false;
      }
      const std::string_view esc = s.substr(i, 3);
      // In a host only non-ASCII bytes may be escaped, and "%25" (a zone's percent sign).
      if (mode == Mode::kHost && Unhex(s[i + 1]) < 8 && esc != "%25") {
        *error = "invalid URL escape " + GoQuote(esc);
        return false;
      }
      if (mode == Mode::kZone) {
        const auto v = static_cast<unsigned char>(Unhex(s[i + 1]) << 4 | Unhex(s[i + 2]));
        if (esc != "%25" && v != ' ' && (v >= 0x80 || !HostByte(v))) {
          *error = "invalid URL escape " + GoQuote(esc);
          return false;
        }
      }
      i += 3;
      continue;
    }
    if (host_like && c < 0x80 && !HostByte(c)) {
      *error = "invalid character " + GoQuote(s.substr(i, 1)) + " in host name";
      return false;
    }
    ++i;
  }
  out->clear();
  out->reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      out->push_back(static_cast<char>(Unhex(s[i + 1]) << 4 | Unhex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+' && mode == Mode::kQueryComponent) {
      out->push_back(' ');  // a query component's '+' is a space
    } else {
      out->push_back(s[i]);
    }
  }
  return true;
}

// net/url's shouldEscape for the modes used here: whether writing `c` needs %XX.
bool ShouldEscape(unsigned char c, Mode mode) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return false;
  if ((mode == Mode::kHost || mode == Mode::kZone) && c < 0x80 && HostByte(c))
    return false;
  if (c == '-' || c == '_' || c == '.' || c == '~')
    return false;
  constexpr std::string_view kReserved = "$&+,/:;=?@";
  if (c < 0x80 && kReserved.find(static_cast<char>(c)) != std::string_view::npos) {
    switch (mode) {
      case Mode::kPath: return c == '?';
      case Mode::kUserPassword: return c == '@' || c == '/' || c == '?' || c == ':';
      case Mode::kQueryComponent: return true;
      case Mode::kFragment: return false;
      case Mode::kHost:
      case Mode::kZone: break;
    }
  }
  if (mode == Mode::kFragment && (c == '!' || c == '(' || c == ')' || c == '*'))
    return false;
  return true;
}

// net/url's escape: %XX (upper-case hex) for every byte ShouldEscape names.
std::string Escape(std::string_view s, Mode mode) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == ' ' && mode == Mode::kQueryComponent) {
      out.push_back('+');
    } else if (ShouldEscape(c, mode)) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

// net/url's validEncoded: `s` holds no byte that escaping would change (RFC 3986 pchars, the
// sub-delims, brackets and '%' are accepted as written).
bool ValidEncoded(std::string_view s, Mode mode) {
  constexpr std::string_view kAllowed = "!$&'()*+,;=:@[]%";
  for (char ch : s) {
    if (kAllowed.find(ch) != std::string_view::npos)
      continue;
    if (ShouldEscape(static_cast<unsigned char>(ch), mode))
      return false;
  }
  return true;
}

// validOptionalPort: empty, or ':' followed by digits only.
bool ValidOptionalPort(std::string_view port) {
  if (port.empty())
    return true;
  if (port[0] != ':')
    return false;
  for (char c : port.substr(1)) {
    if (c < '0' || c > '9')
      return false;
  }
  return true;
}

// validUserinfo: RFC 3986 userinfo characters plus '@' (decoded as runes: any non-ASCII byte
// fails).
bool ValidUserinfo(std::string_view s) {
  constexpr std::string_view kExtra = "-._:~!$&'()*+,;=%@";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      continue;
    if (kExtra.find(ch) == std::string_view::npos)
      return false;
  }
  return true;
}

// parseHost.
bool ParseHost(std::string_view scheme, std::string_view host, std::string* out,
               std::string* error) {
  const size_t open = host.rfind('[');
  if (open != std::string_view::npos && open > 0) {
    *error = "invalid IP-literal";
    return false;
  }
  if (open == 0) {
    const size_t close = host.rfind(']');
    if (close == std::string_view::npos) {
      *error = "missing ']' in host";
      return false;
    }
    const std::string_view colon_port = host.substr(close + 1);
    if (!ValidOptionalPort(colon_port)) {
      *error = "invalid port " + GoQuote(colon_port) + " after host";
      return false;
    }
    std::string port;
    if (!Unescape(colon_port, Mode::kHost, &port, error))
      return false;
    const std::string_view hostname = host.substr(1, close - 1);
    std::string unescaped;
    const size_t zone = hostname.find("%25");
    if (zone != std::string_view::npos) {
      std::string host_part, zone_part;
      if (!Unescape(hostname.substr(0, zone), Mode::kHost, &host_part, error) ||
          !Unescape(hostname.substr(zone), Mode::kZone, &zone_part, error)) {
        return false;
      }
      unescaped = host_part + zone_part;
    } else if (!Unescape(hostname, Mode::kHost, &unescaped, error)) {
      return false;
    }
    // Only an IPv6 address may be enclosed in brackets.
    IpAddr addr;
    std::string_view addr_zone;
    std::string netip_error;
    if (!ParseAddr(unescaped, &addr, &addr_zone, &netip_error)) {
      *error = "invalid host: " + netip_error;
      return false;
    }
    if (addr.is4) {
      *error = "invalid IP-literal";
      return false;
    }
    *out = "[" + unescaped + "]" + port;
    return true;
  }
  if (const size_t first = host.find(':'); first != std::string_view::npos) {
    size_t i = first;
    // Go 1.26 (urlstrictcolons=1): an http(s) host may hold one colon; other schemes keep the
    // historical reading, the port after the last colon.
    if (host.rfind(':') != first && scheme != "http" && scheme != "https")
      i = host.rfind(':');
    const std::string_view colon_port = host.substr(i);
    if (!ValidOptionalPort(colon_port)) {
      *error = "invalid port " + GoQuote(colon_port) + " after host";
      return false;
    }
  }
  return Unescape(host, Mode::kHost, out, error);
}

// parseAuthority.
bool ParseAuthority(std::string_view scheme, std::string_view authority, GoUrl* u,
                    std::string* error) {
  const size_t at = authority.rfind('@');
  const std::string_view host_text =
      at == std::string_view::npos ? authority : authority.substr(at + 1);
  if (!ParseHost(scheme, host_text, &u->host, error))
    return false;
  if (at == std::string_view::npos)
    return true;
  const std::string_view userinfo = authority.substr(0, at);
  if (!ValidUserinfo(userinfo)) {
    *error = "net/url: invalid userinfo";
    return false;
  }
  u->has_user = true;
  const size_t colon = userinfo.find(':');
  if (!Unescape(userinfo.substr(0, colon), Mode::kUserPassword, &u->username, error)) {
    return false;
  }
  if (colon != std::string_view::npos) {
    u->has_password = true;
    if (!Unescape(userinfo.substr(colon + 1), Mode::kUserPassword, &u->password, error)) {
      return false;
    }
  }
  return true;
}

// getScheme: false only for a leading ':' ("missing protocol scheme").
bool GetScheme(std::string_view raw, std::string_view* scheme, std::string_view* rest) {
  *scheme = {};
  *rest = raw;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      continue;
    if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
      if (i == 0)
        return true;
      continue;
    }
    if (c == ':') {
      if (i == 0)
        return false;
      *scheme = raw.substr(0, i);
      *rest = raw.substr(i + 1);
    }
    return true;
  }
  return true;
}

// net/url's parse(rawURL, viaRequest); *error is the bare error (without the url.Error wrapping).
bool Parse(std::string_view raw, bool via_request, GoUrl* u, std::string* error) {
  for (char ch : raw) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < ' ' || c == 0x7f) {
      *error = "net/url: invalid control character in URL";
      return false;
    }
  }
  if (raw.empty() && via_request) {
    *error = "empty url";
    return false;
  }
  if (raw == "*") {
    u->escaped_path.assign(1, '*');
    u->path = u->escaped_path;
    return true;
  }
  std::string_view scheme, rest;
  if (!GetScheme(raw, &scheme, &rest)) {
    *error = "missing protocol scheme";
    return false;
  }
  u->scheme.assign(scheme);
  for (char& c : u->scheme) {
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  }
  const size_t q = rest.find('?');
  if (!rest.empty() && rest.back() == '?' && q == rest.size() - 1) {
    u->force_query = true;
    rest.remove_suffix(1);
  } else if (q != std::string_view::npos) {
    u->raw_query.assign(rest.substr(q + 1));
    rest = rest.substr(0, q);
  }
  if (rest.empty() || rest[0] != '/') {
    if (!u->scheme.empty()) {
      u->opaque.assign(rest);  // a rootless path is opaque
      return true;
    }
    if (via_request) {
      *error = "invalid URI for request";
      return false;
    }
    // A relative reference's first segment cannot hold a colon (it would read as a scheme).
    if (rest.substr(0, rest.find('/')).find(':') != std::string_view::npos) {
      *error = "first path segment in URL cannot contain colon";
      return false;
    }
  }
  const bool double_slash = rest.substr(0, 2) == "//";
  if ((!u->scheme.empty() || (!via_request && rest.substr(0, 3) != "///")) && double_slash) {
    std::string_view authority = rest.substr(2);
    rest = {};
    if (const size_t slash = authority.find('/'); slash != std::string_view::npos) {
      rest = authority.substr(slash);
      authority = authority.substr(0, slash);
    }
    if (!ParseAuthority(u->scheme, authority, u, error))
      return false;
  } else if (!u->scheme.empty() && !rest.empty() && rest[0] == '/') {
    u->omit_host = true;
  }
  u->escaped_path.assign(rest);
  return Unescape(rest, Mode::kPath, &u->path, error);
}

}  // namespace

bool ParseRequestUri(std::string_view raw, GoUrl* out, std::string* error) {
  *out = GoUrl();
  std::string err;
  if (Parse(raw, /*via_request=*/true, out, &err))
    return true;
  *error = "parse " + GoQuote(raw) + ": " + err;
  return false;
}

bool ParseUrl(std::string_view raw, GoUrl* out, std::string* error) {
  *out = GoUrl();
  const size_t hash = raw.find('#');
  const std::string_view u = raw.substr(0, hash);
  std::string err;
  if (!Parse(u, /*via_request=*/false, out, &err)) {
    *error = "parse " + GoQuote(u) + ": " + err;
    return false;
  }
  if (hash == std::string_view::npos || hash + 1 == raw.size())
    return true;
  const std::string_view frag = raw.substr(hash + 1);
  if (!Unescape(frag, Mode::kFragment, &out->fragment, &err)) {
    *error = "parse " + GoQuote(raw) + ": " + err;
    return false;
  }
  out->raw_fragment.assign(frag);
  return true;
}

std::string EscapedPath(const GoUrl& u) {
  // When the path as written is a valid escaping it decodes to `path` (parsing decoded it), so
  // Go's RawPath check reduces to ValidEncoded; "*" passes it too.
  if (ValidEncoded(u.escaped_path, Mode::kPath))
    return u.escaped_path;
  return Escape(u.path, Mode::kPath);
}

namespace {
// net/url's splitHostPort: a valid ":digits" suffix is the port; brackets are dropped.
void SplitHostPort(std::string_view host_port, std::string_view* host, std::string_view* port) {
  *host = host_port;
  *port = {};
  const size_t colon = host_port.rfind(':');
  if (colon != std::string_view::npos && ValidOptionalPort(host_port.substr(colon))) {
    *host = host_port.substr(0, colon);
    *port = host_port.substr(colon + 1);
  }
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
}
}  // namespace

std::string_view Hostname(const GoUrl& u) {
  std::string_view host, port;
  SplitHostPort(u.host, &host, &port);
  return host;
}

std::string_view Port(const GoUrl& u) {
  std::string_view host, port;
  SplitHostPort(u.host, &host, &port);
  return port;
}

std::string UrlString(const GoUrl& u) {
  std::string out;
  if (!u.scheme.empty())
    out += u.scheme + ":";
  if (!u.opaque.empty()) {
    out += u.opaque;
  } else {
    if ((!u.scheme.empty() || !u.host.empty() || u.has_user) &&
        !(u.omit_host && u.host.empty() && !u.has_user)) {
      if (!u.host.empty() || !u.path.empty() || u.has_user)
        out += "//";
      if (u.has_user) {
        out += Escape(u.username, Mode::kUserPassword);
        if (u.has_password)
          (out += ':') += Escape(u.password, Mode::kUserPassword);
        out += "@";
      }
      out += Escape(u.host, Mode::kHost);
    }
    const std::string path = EscapedPath(u);
    if (!path.empty() && path[0] != '/' && !u.host.empty())
      out += "/";
    // A relative path whose first segment holds a colon gets "./" (it would read as a scheme).
    if (out.empty() && path.substr(0, path.find('/')).find(':') != std::string::npos)
      out += "./";
    out += path;
  }
  if (u.force_query || !u.raw_query.empty())
    out += "?" + u.raw_query;
  if (!u.fragment.empty()) {
    out += "#";
    out += ValidEncoded(u.raw_fragment, Mode::kFragment) && !u.raw_fragment.empty()
               ? u.raw_fragment
               : Escape(u.fragment, Mode::kFragment);
  }
  return out;
}

QueryValues ParseQuery(std::string_view raw_query) {
  QueryValues values;
  // Go refuses a query of more than 10000 parameters as a whole (URL.Query is then empty).
  size_t params = 1;
  for (char c : raw_query)
    params += c == '&';
  if (params > 10000)
    return values;
  std::unordered_map<std::string, size_t> index;  // key -> position in `values`
  while (!raw_query.empty()) {
    const size_t amp = raw_query.find('&');
    std::string_view pair = raw_query.substr(0, amp);
    raw_query = amp == std::string_view::npos ? std::string_view() : raw_query.substr(amp + 1);
    if (pair.empty() || pair.find(';') != std::string_view::npos)
      continue;
    const size_t eq = pair.find('=');
    std::string key, value, error;
    if (!Unescape(pair.substr(0, eq), Mode::kQueryComponent, &key, &error))
      continue;
    if (eq != std::string_view::npos &&
        !Unescape(pair.substr(eq + 1), Mode::kQueryComponent, &value, &error)) {
      continue;
    }
    const auto [it, added] = index.try_emplace(key, values.size());
    if (added)
      values.emplace_back(std::move(key), std::vector<std::string>());
    values[it->second].second.push_back(std::move(value));
  }
  return values;
}

}  // namespace devlet::cel::internal
