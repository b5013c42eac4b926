// Private: the evaluator's value representation.
//
// Val is a 16-byte trivially copyable handle. Payloads that do not fit (strings, lists, maps,
// errors, optionals, Quantity/Semver objects) live in the evaluation's Arena or in the Program
// (constants), or are borrowed from the Activation / DeviceView, all of which outlive one
// evaluation. Nothing is reference counted, so evaluating one Program from many threads shares no
// mutable state. Results leave the evaluator as owned devlet::cel::Value (ToValue).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace devlet::cel {
class Quantity;
class Semver;
class Value;
namespace dra {
class DeviceView;
struct Attribute;
}  // namespace dra
}  // namespace devlet::cel

namespace devlet::cel::internal {

struct IpAddr;
struct CidrPrefix;
struct GoUrl;

class Arena {
 public:
  Arena() = default;
  ~Arena() { Release(); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  void* Alloc(size_t size, size_t align = alignof(std::max_align_t)) {
    uintptr_t p = (reinterpret_cast<uintptr_t>(cur_) + align - 1) & ~(uintptr_t{align} - 1);
    if (cur_ == nullptr || p + size > reinterpret_cast<uintptr_t>(end_)) {
      Grow(size + align);
      p = (reinterpret_cast<uintptr_t>(cur_) + align - 1) & ~(uintptr_t{align} - 1);
    }
    cur_ = reinterpret_cast<char*>(p + size);
    return reinterpret_cast<void*>(p);
  }

  template <typename T, typename... Args>
  T* New(Args&&... args) {
    T* t = new (Alloc(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
    if constexpr (!std::is_trivially_destructible_v<T>) {
      dtors_.push_back({t, [](void* x) { static_cast<T*>(x)->~T(); }});
    }
    return t;
  }

  template <typename T>
  T* NewArray(size_t n) {
    static_assert(std::is_trivially_destructible_v<T>);
    return static_cast<T*>(Alloc(sizeof(T) * (n == 0 ? 1 : n), alignof(T)));
  }

  std::string_view Str(std::string_view s) {
    if (s.empty()) return {};
    char* p = static_cast<char*>(Alloc(s.size(), 1));
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  }

  // Reset frees everything but keeps the first block for reuse.
  void Reset() {
    RunDtors();
    if (blocks_.empty()) return;
    for (size_t i = 1; i < blocks_.size(); ++i) ::operator delete(blocks_[i].first);
    blocks_.resize(1);
    cur_ = static_cast<char*>(blocks_[0].first);
    end_ = cur_ + blocks_[0].second;
  }

  size_t bytes_allocated() const {
    size_t n = 0;
    for (const auto& b : blocks_) n += b.second;
    return n;
  }

 private:
  void Grow(size_t min) {
    size_t size = blocks_.empty() ? 4096 : blocks_.back().second * 2;
    if (size < min) size = min;
    if (size > (size_t{1} << 24) && min < (size_t{1} << 24)) size = size_t{1} << 24;
    void* block = ::operator new(size);
    blocks_.push_back({block, size});
    cur_ = static_cast<char*>(block);
    end_ = cur_ + size;
  }
  void RunDtors() {
    for (size_t i = dtors_.size(); i-- > 0;) dtors_[i].second(dtors_[i].first);
    dtors_.clear();
  }
  void Release() {
    RunDtors();
    for (auto& b : blocks_) ::operator delete(b.first);
    blocks_.clear();
    cur_ = end_ = nullptr;
  }

  char* cur_ = nullptr;
  char* end_ = nullptr;
  std::vector<std::pair<void*, size_t>> blocks_;
  std::vector<std::pair<void*, void (*)(void*)>> dtors_;
};

enum class VK : uint8_t {
  kNull,
  kBool,
  kInt,
  kUint,
  kDouble,
  kString,
  kBytes,
  kList,
  kMap,
  kOptional,
  kType,
  kError,
  kQuantity,
  kSemver,
  kTimestamp,  // i: Unix seconds, n: nanoseconds
  kDuration,   // i: nanoseconds
  kDevice,     // dev: the DRA device object
  kDeviceMap,  // dev: device.attributes (sub == 0) or device.capacity (sub == 1)
  kDomainMap,  // dom: one domain of attributes or capacity
  kIP,         // ip: a net.IP of Kubernetes' IP library
  kCIDR,       // cidr: a net.CIDR of Kubernetes' CIDR library
  kFormat,     // i: a named format of Kubernetes' format library (format.cc's FormatId)
  kURL,        // url: a kubernetes.URL of Kubernetes' URL library (Go's url.URL fields)
};

struct Val;

// Append-friendly list storage: a Val of length n views data[0, n). Appending to a Val whose n
// equals `used` may write in place (Go slice style), so `@result + [x]` in comprehensions is
// amortized O(1) while every Val stays immutable.
struct ListRep {
  Val* data;
  uint32_t used;
  uint32_t cap;
};

struct MapRep {
  Val* keys;
  Val* vals;
  uint32_t used;
  uint32_t cap;
};

struct DomainRef {
  const dra::DeviceView* dev;
  std::string_view domain;
  bool capacity;
};

struct Val {
  VK kind = VK::kNull;
  uint8_t sub = 0;
  // kTimestamp: the UTC offset of its Go location in minutes (time.Parse keeps "+05:30"; Go's
  // RFC 3339 offsets are within +-23:59), which string() prints; 0 for UTC and time.Local.
  int16_t tz_minutes = 0;
  uint32_t n = 0;  // byte length of strings/bytes/errors/type names; list and map sizes
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    const char* s;
    ListRep* l;
    MapRep* m;
    const Val* opt;  // kOptional: nullptr = none
    const Quantity* q;
    const Semver* v;
    const IpAddr* ip;
    const CidrPrefix* cidr;
    const GoUrl* url;
    const dra::DeviceView* dev;
    const DomainRef* dom;
  };
  Val() : u(0) {}

  static Val Null() { return Val(); }
  static Val Bool(bool x) {
    Val r;
    r.kind = VK::kBool;
    r.b = x;
    return r;
  }
  static Val Int(int64_t x) {
    Val r;
    r.kind = VK::kInt;
    r.i = x;
    return r;
  }
  static Val Uint(uint64_t x) {
    Val r;
    r.kind = VK::kUint;
    r.u = x;
    return r;
  }
  static Val Double(double x) {
    Val r;
    r.kind = VK::kDouble;
    r.d = x;
    return r;
  }
  // Borrowing constructors: `s` must outlive the evaluation.
  static Val Str(std::string_view x, VK k = VK::kString) {
    Val r;
    r.kind = k;
    r.s = x.data();
    r.n = static_cast<uint32_t>(x.size());
    return r;
  }
  static Val TypeName(std::string_view x) { return Str(x, VK::kType); }
  static Val Opt(const Val* x) {
    Val r;
    r.kind = VK::kOptional;
    r.opt = x;
    return r;
  }

  bool is_error() const { return kind == VK::kError; }
  std::string_view str() const { return {s == nullptr ? "" : s, n}; }
  const Val* list_data() const { return l == nullptr ? nullptr : l->data; }
};

static_assert(sizeof(Val) == 16);
static_assert(std::is_trivially_copyable_v<Val>);

// Type name of a runtime value, as CEL's type() reports it.
std::string_view TypeNameOf(const Val& v);

// Conversions between owned Values and Vals.
Val FromValue(const Value& value, Arena& arena);
Value ToValue(const Val& v);

}  // namespace devlet::cel::internal
