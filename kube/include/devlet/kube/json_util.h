// The codec's JSON helpers, shared by its sources: the JSON tree type and input limits. Namespace
// internal: not an API for other modules; a public header so that kube_test can test them.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace devlet::kube::internal {

// IsLookupKey: a key type other than std::string that converts to std::string_view (string
// literals, string_view); basic_json uses these overloads for its transparent lookups.
template <class K>
constexpr bool IsLookupKey() {
  return !std::is_same_v<std::decay_t<K>, std::string> &&
         std::is_convertible_v<const std::decay_t<K>&, std::string_view>;
}

// IndexedOrderedMap is the object type of Json. Like nlohmann::ordered_map it keeps members in
// insertion order (so that opaque parameters and kept fields round-trip), but once an object has
// kIndexFrom members it also keeps a hash index, so that inserting or finding a key costs O(1)
// instead of a linear search: with ordered_map, parsing an object with N keys took O(N^2) time
// (issue 14: 160k keys 21 s). The index is an open-addressing table of positions, so it survives
// copies and moves of the map unchanged and costs 8-32 bytes per member. Only the members below
// change the map, each keeping the index; erasing is O(N), as in ordered_map.
template <class Key, class T, class IgnoredLess = std::less<Key>,
          class Allocator = std::allocator<std::pair<const Key, T>>>
class IndexedOrderedMap : private std::vector<std::pair<const Key, T>, Allocator> {
  static_assert(std::is_same_v<Key, std::string>, "keys are std::string");

 public:
  using Container = std::vector<std::pair<const Key, T>, Allocator>;
  using key_type = Key;
  using mapped_type = T;
  using value_type = typename Container::value_type;
  using size_type = typename Container::size_type;
  using difference_type = typename Container::difference_type;
  using allocator_type = typename Container::allocator_type;
  using reference = typename Container::reference;
  using const_reference = typename Container::const_reference;
  using pointer = typename Container::pointer;
  using const_pointer = typename Container::const_pointer;
  using iterator = typename Container::iterator;
  using const_iterator = typename Container::const_iterator;
  using key_compare = std::equal_to<>;  // as ordered_map: lets basic_json look up string_views

  // Objects smaller than this are searched linearly (faster than hashing for a few members).
  static constexpr size_type kIndexFrom = 16;

  IndexedOrderedMap() = default;

  explicit IndexedOrderedMap(const Allocator& alloc) : Container(alloc) {}

  template <class It>
  IndexedOrderedMap(It first, It last, const Allocator& alloc = Allocator())
      : Container(first, last, alloc) {
    Reindex();
  }

  IndexedOrderedMap(std::initializer_list<value_type> init, const Allocator& alloc = Allocator())
      : Container(init, alloc) {
    Reindex();
  }

  using Container::begin;
  using Container::cbegin;
  using Container::cend;
  using Container::crbegin;
  using Container::crend;
  using Container::empty;
  using Container::end;
  using Container::get_allocator;
  using Container::max_size;
  using Container::rbegin;
  using Container::rend;
  using Container::reserve;
  using Container::size;

  // emplace inserts `key` with `value` unless the key is present; .second says whether it did.
  std::pair<iterator, bool> emplace(const key_type& key, T&& value) {
    return EmplaceImpl(key, std::move(value));
  }

  std::pair<iterator, bool> emplace(key_type&& key, T&& value) {
    return EmplaceImpl(std::move(key), std::move(value));
  }

  template <class K, std::enable_if_t<IsLookupKey<K>(), int> = 0>
  std::pair<iterator, bool> emplace(K&& key, T&& value) {
    return EmplaceImpl(std::forward<K>(key), std::move(value));
  }

  T& operator[](const key_type& key) { return emplace(key, T{}).first->second; }

  T& operator[](key_type&& key) { return emplace(std::move(key), T{}).first->second; }

  template <class K, std::enable_if_t<IsLookupKey<K>(), int> = 0>
  T& operator[](K&& key) {
    return emplace(std::forward<K>(key), T{}).first->second;
  }

  const T& operator[](const key_type& key) const { return at(key); }

  template <class K, std::enable_if_t<IsLookupKey<K>(), int> = 0>
  const T& operator[](K&& key) const {
    return at(std::forward<K>(key));
  }

  template <class K,
            std::enable_if_t<IsLookupKey<K>() || std::is_same_v<std::decay_t<K>, Key>, int> = 0>
  T& at(K&& key) {
    const size_type i = Locate(View(key));
    if (i == npos) {
      throw std::out_of_range("key not found");
    }
    return (*this)[i].second;
  }

  template <class K,
            std::enable_if_t<IsLookupKey<K>() || std::is_same_v<std::decay_t<K>, Key>, int> = 0>
  const T& at(K&& key) const {
    const size_type i = Locate(View(key));
    if (i == npos) {
      throw std::out_of_range("key not found");
    }
    return Items()[i].second;
  }

  template <class K,
            std::enable_if_t<IsLookupKey<K>() || std::is_same_v<std::decay_t<K>, Key>, int> = 0>
  iterator find(K&& key) {
    const size_type i = Locate(View(key));
    return i == npos ? end() : begin() + static_cast<difference_type>(i);
  }

  template <class K,
            std::enable_if_t<IsLookupKey<K>() || std::is_same_v<std::decay_t<K>, Key>, int> = 0>
  const_iterator find(K&& key) const {
    const size_type i = Locate(View(key));
    return i == npos ? end() : begin() + static_cast<difference_type>(i);
  }

  template <class K,
            std::enable_if_t<IsLookupKey<K>() || std::is_same_v<std::decay_t<K>, Key>, int> = 0>
  size_type count(K&& key) const {
    return Locate(View(key)) == npos ? 0 : 1;
  }

  std::pair<iterator, bool> insert(value_type&& value) {
    return emplace(value.first, std::move(value.second));
  }

  std::pair<iterator, bool> insert(const value_type& value) {
    return emplace(value.first, T(value.second));
  }

  template <class It>
  void insert(It first, It last) {
    for (; first != last; ++first) {
      insert(*first);
    }
  }

  template <class K,
            std::enable_if_t<IsLookupKey<K>() || std::is_same_v<std::decay_t<K>, Key>, int> = 0>
  size_type erase(K&& key) {
    const size_type i = Locate(View(key));
    if (i == npos) {
      return 0;
    }
    erase(begin() + static_cast<difference_type>(i));
    return 1;
  }

  iterator erase(iterator pos) { return erase(pos, std::next(pos)); }

  iterator erase(const_iterator first, const_iterator last) {
    // Keys are const, so the vector cannot shift them by assignment: rebuild without the range.
    const auto from = static_cast<size_type>(first - cbegin());
    const auto to = static_cast<size_type>(last - cbegin());
    if (from == to) {
      return begin() + static_cast<difference_type>(from);
    }
    Container kept(get_allocator());
    kept.reserve(size() - (to - from));
    for (size_type i = 0; i < size(); ++i) {
      if (i < from || i >= to) {
        kept.emplace_back(std::move(Items()[i].first), std::move(Items()[i].second));
      }
    }
    Items().swap(kept);
    Reindex();
    return begin() + static_cast<difference_type>(from);
  }

  void clear() noexcept {
    Items().clear();
    slots_.clear();
  }

  friend bool operator==(const IndexedOrderedMap& a, const IndexedOrderedMap& b) {
    return a.Items() == b.Items();
  }

  friend auto operator<=>(const IndexedOrderedMap& a, const IndexedOrderedMap& b) {
    return a.Items() <=> b.Items();
  }

  friend bool operator<(const IndexedOrderedMap& a, const IndexedOrderedMap& b) {
    return a.Items() < b.Items();
  }

 private:
  static constexpr size_type npos = static_cast<size_type>(-1);

  template <class K>
  static std::string_view View(const K& key) {
    return std::string_view(key);
  }

  Container& Items() { return *this; }

  const Container& Items() const { return *this; }

  static std::size_t Hash(std::string_view key) {
    return absl::Hash<absl::string_view>{}(absl::string_view(key.data(), key.size()));
  }

  // Locate returns the position of `key`, or npos.
  size_type Locate(std::string_view key) const {
    const Container& items = Items();
    if (slots_.empty()) {
      for (size_type i = 0; i < items.size(); ++i) {
        if (items[i].first == key) {
          return i;
        }
      }
      return npos;
    }
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t s = Hash(key) & mask;; s = (s + 1) & mask) {
      const uint32_t slot = slots_[s];
      if (slot == 0) {
        return npos;
      }
      if (items[slot - 1].first == key) {
        return slot - 1;
      }
    }
  }

  template <class K>
  std::pair<iterator, bool> EmplaceImpl(K&& key, T&& value) {
    const size_type found = Locate(View(key));
    if (found != npos) {
      return {begin() + static_cast<difference_type>(found), false};
    }
    Items().emplace_back(std::forward<K>(key), std::move(value));
    if (size() >= kIndexFrom) {
      if (slots_.size() < 2 * size()) {
        Reindex();  // first time, or load above one half: rebuild at twice the size
      } else {
        AddSlot(size() - 1);
      }
    }
    return {std::prev(end()), true};
  }

  void AddSlot(size_type i) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t s = Hash(Items()[i].first) & mask;
    while (slots_[s] != 0) {
      s = (s + 1) & mask;
    }
    slots_[s] = static_cast<uint32_t>(i + 1);
  }

  // Reindex rebuilds the index (none below kIndexFrom members). A key present twice (only a
  // range constructor can do that) is found at its first position, as in ordered_map.
  void Reindex() {
    slots_.clear();
    if (size() < kIndexFrom) {
      return;
    }
    std::size_t capacity = 64;
    while (capacity < 4 * size()) {
      capacity *= 2;
    }
    slots_.assign(capacity, 0);
    for (size_type i = 0; i < size(); ++i) {
      if (Locate(Items()[i].first) == npos) {
        AddSlot(i);
      }
    }
  }

  std::vector<uint32_t> slots_;  // position + 1 of each indexed member, 0 for an empty slot
};

// Json keeps object keys in input order, so that opaque parameters and kept fields round-trip.
using Json = nlohmann::basic_json<IndexedOrderedMap>;

struct Limits {
  int max_depth = 64;
  std::size_t max_nodes = 1u << 20;
};

// CheckJsonDepth fails when brackets nest deeper than `max_depth` (before nlohmann parses, whose
// recursive destruction and dump could otherwise exhaust the stack).
absl::Status CheckJsonDepth(std::string_view text, int max_depth);

// ParseJson parses one JSON value. A key that appears twice in one object is an error naming
// its path (`duplicate field "metadata.name"`, Kubernetes' strict decoding error).
absl::StatusOr<Json> ParseJson(std::string_view text, const Limits& limits);

// ParseYaml parses a YAML stream into one JSON value per document (null for an empty one),
// resolving plain scalars as go-yaml v2 does for Kubernetes (YAML 1.1 booleans y/yes/on/...,
// null, ints incl. 0x/0o, floats, else string). Duplicate keys are errors, as in ParseJson.
absl::StatusOr<std::vector<Json>> ParseYaml(std::string_view text, const Limits& limits);

// DumpJson writes compact JSON (invalid UTF-8 replaced, never throws).
std::string DumpJson(const Json& json, int indent = -1);

// IsValidUtf8 reports whether `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// TypeName names a JSON value's type for messages ("a string", "an object").
std::string TypeName(const Json& json);

// QuoteForMessage quotes input echoed in an error message as Go's %q does (devlet::GoQuote:
// control characters, NUL, quotes escaped), cut to `max_bytes` bytes of input with the full
// length added: hostile input must reach neither logs raw nor by the megabyte.
std::string QuoteForMessage(std::string_view text, std::size_t max_bytes = 128);

// EscapeForMessage escapes control characters and invalid UTF-8 in text shown unquoted (a field
// path built from keys, a parser's message quoting input), cut to `max_bytes` bytes of input.
std::string EscapeForMessage(std::string_view text, std::size_t max_bytes = std::string_view::npos);

}  // namespace devlet::kube::internal
