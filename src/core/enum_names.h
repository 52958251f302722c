#pragma once
// One table of (value, name) per enum: the value's name and the value of a name both derive from
// it, and an unknown name is one error that lists every name. Several names may map to one
// value (aliases); a value's name is its first.
#include <cstddef>
#include <string>

#include "core/error.h"

namespace pt {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// "a, b or c" (each name once, in table order).
template <class E, size_t N>
std::string enum_names_text(const EnumName<E> (&table)[N]) {
  std::string text;
  for (size_t i = 0; i < N; ++i) text += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  return text;
}

template <class E, size_t N>
const char* enum_name(const EnumName<E> (&table)[N], E value) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return "?";
}

// `what` names the input in the error: "--precision", "attention".
template <class E, size_t N>
E enum_from_name(const EnumName<E> (&table)[N], const std::string& name, const std::string& what) {
  for (const auto& e : table)
    if (name == e.name) return e.value;
  PT_FAIL(what + " must be " + enum_names_text(table) + " (got '" + name + "')");
}

}  // namespace pt
