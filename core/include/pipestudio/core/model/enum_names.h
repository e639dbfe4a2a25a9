#pragma once
// One way to name an enum's values: a table of (value, name) pairs and two lookups, instead of
// a hand-written switch per enum and a chain of comparisons per parser. The first entry is
// the fallback name for a value the table does not hold (a corrupt cast).
//
//   constexpr EnumName<Alignment> kAlignmentNames[] = {{Alignment::Absolute, "absolute"}, ...};
//   std::string_view alignmentName(Alignment a) { return enumName(a, kAlignmentNames); }
//   std::optional<Alignment> alignmentFromName(std::string_view n) { return enumFromName(n, kAlignmentNames);
//   }
#include <cstddef>
#include <optional>
#include <string_view>

namespace ps::core {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, std::size_t N>
constexpr std::string_view enumName(E value, const EnumName<E> (&table)[N]) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return table[0].name;
}

template <typename E, std::size_t N>
constexpr std::optional<E> enumFromName(std::string_view name, const EnumName<E> (&table)[N]) {
  for (const auto& e : table)
    if (e.name == name) return e.value;
  return std::nullopt;
}

}  // namespace ps::core

// The two functions a header declares for an enum, defined over its table in one line each:
//   PS_ENUM_NAME_FUNCTION(Alignment, kAlignmentNames, alignmentName);
//   PS_ENUM_FROM_NAME_FUNCTION(Alignment, kAlignmentNames, alignmentFromName);
#define PS_ENUM_NAME_FUNCTION(E, TABLE, NAME)  \
  std::string_view NAME(E value) {             \
    return ::ps::core::enumName(value, TABLE); \
  }                                            \
  static_assert(true, "")
#define PS_ENUM_FROM_NAME_FUNCTION(E, TABLE, FROM) \
  std::optional<E> FROM(std::string_view name) {   \
    return ::ps::core::enumFromName(name, TABLE);  \
  }                                                \
  static_assert(true, "")
