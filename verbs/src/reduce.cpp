// SPDX-License-Identifier: Apache-2.0
#include "hcasim/verbs/reduce.h"

#include <algorithm>
#include <stdexcept>

namespace hcasim::verbs {
namespace {

template <class T, class F>
void apply(void* dst, const void* src, size_t n, F f) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = f(d[i], s[i]);
}

// dst[i] = f(a[i], b[i]); dst may alias a or b (element by element, read before written).
template <class T, class F>
void apply3(void* dst, const void* a, const void* b, size_t n, F f) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
}

template <class T>
void reduceTyped3(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return apply3<T>(dst, a, b, n, [](T x, T y) { return T(x + y); });
    case ReduceOp::Prod: return apply3<T>(dst, a, b, n, [](T x, T y) { return T(x * y); });
    case ReduceOp::Min: return apply3<T>(dst, a, b, n, [](T x, T y) { return std::min(x, y); });
    case ReduceOp::Max: return apply3<T>(dst, a, b, n, [](T x, T y) { return std::max(x, y); });
  }
}

template <class T>
void reduceTyped(void* dst, const void* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return apply<T>(dst, src, n, [](T a, T b) { return T(a + b); });
    case ReduceOp::Prod: return apply<T>(dst, src, n, [](T a, T b) { return T(a * b); });
    case ReduceOp::Min: return apply<T>(dst, src, n, [](T a, T b) { return std::min(a, b); });
    case ReduceOp::Max: return apply<T>(dst, src, n, [](T a, T b) { return std::max(a, b); });
  }
}

/** Integers wrap on overflow (two's complement), as hardware reducers do: sum and product are
 *  computed in the unsigned type of the same width, where overflow is defined. */
template <class T, class U>
void reduceWrapping(void* dst, const void* src, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return apply<T>(dst, src, n, [](T a, T b) { return T(U(a) + U(b)); });
    case ReduceOp::Prod: return apply<T>(dst, src, n, [](T a, T b) { return T(U(a) * U(b)); });
    default: return reduceTyped<T>(dst, src, n, op);
  }
}

template <class T, class U>
void reduceWrapping3(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return apply3<T>(dst, a, b, n, [](T x, T y) { return T(U(x) + U(y)); });
    case ReduceOp::Prod: return apply3<T>(dst, a, b, n, [](T x, T y) { return T(U(x) * U(y)); });
    default: return reduceTyped3<T>(dst, a, b, n, op);
  }
}

}  // namespace

size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::Float: return 4;
    case DataType::Double: return 8;
    case DataType::Int32: return 4;
    case DataType::Int64: return 8;
  }
  return 0;
}

const char* dataTypeName(DataType t) {
  switch (t) {
    case DataType::Float: return "float";
    case DataType::Double: return "double";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
  }
  return "?";
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Prod: return "prod";
  }
  return "?";
}

DataType parseDataType(const std::string& s) {
  for (DataType t : {DataType::Float, DataType::Double, DataType::Int32, DataType::Int64})
    if (s == dataTypeName(t)) return t;
  throw std::invalid_argument("unknown data type '" + s + "' (float, double, int32, int64)");
}

ReduceOp parseReduceOp(const std::string& s) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod})
    if (s == reduceOpName(op)) return op;
  throw std::invalid_argument("unknown reduction '" + s + "' (sum, min, max, prod)");
}

void reduceInto(void* dst, const void* src, size_t count, DataType t, ReduceOp op) {
  switch (t) {
    case DataType::Float: return reduceTyped<float>(dst, src, count, op);
    case DataType::Double: return reduceTyped<double>(dst, src, count, op);
    case DataType::Int32: return reduceWrapping<int32_t, uint32_t>(dst, src, count, op);
    case DataType::Int64: return reduceWrapping<int64_t, uint64_t>(dst, src, count, op);
  }
}

void reduceTo(void* dst, const void* a, const void* b, size_t count, DataType t, ReduceOp op) {
  switch (t) {
    case DataType::Float: return reduceTyped3<float>(dst, a, b, count, op);
    case DataType::Double: return reduceTyped3<double>(dst, a, b, count, op);
    case DataType::Int32: return reduceWrapping3<int32_t, uint32_t>(dst, a, b, count, op);
    case DataType::Int64: return reduceWrapping3<int64_t, uint64_t>(dst, a, b, count, op);
  }
}

}  // namespace hcasim::verbs
